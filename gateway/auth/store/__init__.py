"""Auth's tables and keys: accounts and API keys (PostgreSQL), sessions and nonces (Redis), the
service keys' record. The only modules of ``gateway.auth`` that talk to a store's driver."""
