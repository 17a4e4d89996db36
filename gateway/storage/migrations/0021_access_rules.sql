-- An account's access rules (docs/api.md, "Access rules"; gateway/access/): origins, client addresses
-- and methods its API key and session tokens may use. Empty arrays allow everything of their kind; an
-- account without a row has no rules. Written only with the wallet's own signature.
CREATE TABLE access_rules (
    pubkey      TEXT PRIMARY KEY REFERENCES accounts (pubkey),
    origins     TEXT[] NOT NULL DEFAULT '{}',
    addresses   TEXT[] NOT NULL DEFAULT '{}',
    methods     TEXT[] NOT NULL DEFAULT '{}',
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
