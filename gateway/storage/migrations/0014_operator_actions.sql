-- What operators did to accounts outside the product's own paths (`gateway account ...`, `gateway
-- webhooks replay`): one row per change, with who and why. A change of credits is also a ledger
-- entry (type `adjustment` for a credit, `debit` for a debit, its ref `operator:<name>`), written in
-- the same transaction; suspend, resume and limit changes have only this row. Append-only.
CREATE TABLE operator_actions (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT REFERENCES accounts (pubkey),   -- null for a change of no one account
    action              TEXT NOT NULL
                        CHECK (action IN ('credit', 'debit', 'suspend', 'resume', 'limits', 'webhook_replay')),
    detail              JSONB NOT NULL DEFAULT '{}',         -- the change: amounts, limits before and after, the job
    reason              TEXT NOT NULL CHECK (reason <> ''),
    operator            TEXT NOT NULL CHECK (operator <> ''),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX operator_actions_by_account ON operator_actions (pubkey, id DESC);
