-- The deposit watcher's position in the deposit token account's history, so a restart resumes
-- where it stopped. Losing it costs only a rescan: crediting is idempotent per signature.

CREATE TABLE deposit_watch_cursor (
    ata                 TEXT PRIMARY KEY,          -- the followed token account (deposit wallet's USDC ATA)
    last_signature      TEXT NOT NULL,             -- newest signature fully processed, oldest-first order
    last_slot           BIGINT,
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
