"""Identity and authentication: who is calling, proved by an API key, a wallet signature or a session.

Kept import-light on purpose: :mod:`gateway.client` imports :mod:`gateway.core.signing` and must not
drag in the database or Redis clients. Import the parts you need from their modules::

    signing      the signing message and body hash (pure)
    headers      parsing and verifying the X-Pubkey / X-Signature / X-Timestamp / X-Nonce headers (pure)
    credentials  which credentials a request carries, per transport (HTTP, WebSocket, gRPC)
    strategies   one strategy per credential type, tried in docs/api.md's priority order
    stage        ``AuthStage``, the pipeline stage that sets ``call.identity``
    services     ``AuthServices``: every store the stage and the account routes need, started together
"""
