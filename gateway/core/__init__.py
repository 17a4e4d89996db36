"""The pure kernel shared by the features: JSON-RPC envelopes, the method classes and prices, limits,
signing, wallet headers, credentials, deposits, transactions and the error vocabulary. No I/O: no
storage, no Ray, no transports, no network (enforced by the import contracts in ``pyproject.toml``).
"""
