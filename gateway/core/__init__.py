"""The pure core: JSON-RPC envelopes, prices, planning, limits, refund rules, signing, wallet headers,
credentials, deposit parsing and the error vocabulary. No I/O: no storage, no Ray, no transports,
no network (enforced by the import contracts in ``pyproject.toml``, run by ``make check``).
"""
