-- Accounts, keys, credits and their history. Credits are integers (BIGINT) everywhere.
-- The ledger is append-only; an account's balance is the sum of its ledger amounts, and the
-- unexpired remainders of its credit batches add up to the same number.

CREATE TABLE accounts (
    pubkey              TEXT PRIMARY KEY,
    status              TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    ref_code            TEXT,                      -- captured once, at creation
    rate_limit_rps      INTEGER CHECK (rate_limit_rps > 0),        -- per-account override
    concurrency_limit   INTEGER CHECK (concurrency_limit > 0),     -- per-account override
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE referral_codes (
    code                TEXT PRIMARY KEY,
    owner_pubkey        TEXT NOT NULL REFERENCES accounts (pubkey),
    bonus_percent       INTEGER NOT NULL CHECK (bonus_percent BETWEEN 0 AND 100),
    expires_at          TIMESTAMPTZ
);

CREATE TABLE api_keys (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    key_hash            BYTEA NOT NULL UNIQUE,     -- keyed hash; the key itself is never stored
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at          TIMESTAMPTZ
);
CREATE UNIQUE INDEX api_keys_one_active ON api_keys (pubkey) WHERE revoked_at IS NULL;

CREATE TABLE credit_batches (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    source              TEXT NOT NULL CHECK (source IN ('deposit', 'bonus', 'adjustment')),
    granted             BIGINT NOT NULL CHECK (granted > 0),
    remaining           BIGINT NOT NULL CHECK (remaining >= 0 AND remaining <= granted),
    expires_at          TIMESTAMPTZ NOT NULL,
    expiring_notified   BOOLEAN NOT NULL DEFAULT false,
    deposit_signature   TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX credit_batches_live ON credit_batches (pubkey, expires_at) WHERE remaining > 0;

CREATE TABLE ledger_entries (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    type                TEXT NOT NULL CHECK (type IN ('deposit', 'debit', 'refund', 'bonus', 'expiry', 'adjustment')),
    amount              BIGINT NOT NULL,           -- signed: debits and expiries are negative
    balance_after       BIGINT NOT NULL CHECK (balance_after >= 0),
    description         TEXT NOT NULL DEFAULT '',
    ref                 TEXT,                      -- deposit signature, batch id, request id...
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_by_account ON ledger_entries (pubkey, id DESC);

CREATE TABLE usage_history (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    method              TEXT NOT NULL,
    credits             BIGINT NOT NULL,
    request_id          TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX usage_history_by_account ON usage_history (pubkey, id DESC);

CREATE TABLE deposits (
    signature           TEXT PRIMARY KEY,          -- credited at most once
    pubkey              TEXT NOT NULL,             -- the transfer's authority wallet
    amount_base_units   BIGINT NOT NULL CHECK (amount_base_units >= 0),
    credits             BIGINT NOT NULL CHECK (credits >= 0),
    status              TEXT NOT NULL CHECK (status IN ('credited', 'ignored')),
    reason              TEXT,
    slot                BIGINT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX deposits_by_account ON deposits (pubkey, created_at DESC);

CREATE TABLE webhooks (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    url                 TEXT NOT NULL,
    filter_type         TEXT NOT NULL CHECK (filter_type IN ('account', 'program', 'my_account', 'lifecycle', 'signal')),
    filter_value        TEXT,
    lifecycle_events    TEXT[] NOT NULL DEFAULT '{}',
    signal_events       TEXT[] NOT NULL DEFAULT '{}',
    secret              TEXT NOT NULL,
    active              BOOLEAN NOT NULL DEFAULT true,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_by_account ON webhooks (pubkey) WHERE active;

CREATE TABLE delivery_jobs (
    id                  BIGSERIAL PRIMARY KEY,
    webhook_id          BIGINT NOT NULL REFERENCES webhooks (id),
    event_type          TEXT NOT NULL,
    payload             JSONB NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error          TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX delivery_jobs_due ON delivery_jobs (next_attempt_at) WHERE status = 'pending';
