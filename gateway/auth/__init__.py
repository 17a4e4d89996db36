"""Identity and authentication: who is calling, proved by an API key, a wallet signature or a session.

Kept import-light on purpose: import the parts you need from their modules::

    strategies     one strategy per credential type, tried in docs/api.md's priority order
    authenticator  the strategies composed, plus the 402 rules
    stage          ``AuthStage``, the pipeline stage that sets ``call.identity``; ``Gates`` for routes
    services       ``AuthServices``: every store the stage and the account routes need, started together
    endpoints      ``/auth/*`` and ``/account/*`` (routes.py mounts them)
    payment_terms  the 402's deposit and x402 terms
    revocations    the open connections holding each credential, ended when it is revoked

The pure parts (signing, wallet headers, credentials per transport) are in :mod:`gateway.core`.
"""
