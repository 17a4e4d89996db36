-- Outcome-priced sends (sendAndConfirm): the charge is held durably before the transaction is
-- broadcast, and settled at the outcome: the landing price when it confirmed, the base fee when it
-- failed on chain, nothing when it never landed before its blockhash expired or the preflight
-- refused it. A pending send's hold counts against the balance like a live lease's, so the same
-- credits cannot be spent twice; a crash of whatever raced the send leaves the hold pending, and the
-- reconciler settles it from the chain.

CREATE TABLE sends (
    signature           TEXT PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    request_id          TEXT,
    blockhash           TEXT NOT NULL,             -- the transaction's: once invalid it can no longer land
    held                BIGINT NOT NULL CHECK (held > 0),   -- the landing price, held until settled
    base_fee            BIGINT NOT NULL CHECK (base_fee >= 0 AND base_fee <= held),
    status              TEXT NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'confirmed', 'failed', 'expired', 'refused')),
    charged             BIGINT CHECK (charged >= 0 AND charged <= held),   -- set at settlement
    slot                BIGINT,
    error               TEXT,
    legs                TEXT[] NOT NULL DEFAULT '{}',
    retry_count         INTEGER NOT NULL DEFAULT 0,
    settled_by          TEXT,                      -- 'racer' or 'reconciler'
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at          TIMESTAMPTZ
);
CREATE INDEX sends_pending_by_account ON sends (pubkey) WHERE status = 'pending';
CREATE INDEX sends_pending ON sends (created_at) WHERE status = 'pending';
