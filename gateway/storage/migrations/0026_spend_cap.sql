-- An account's daily spend cap (docs/api.md, "Spend cap"): the most credits it spends in a calendar day
-- (UTC), set with the wallet's own signature; NULL: none. ``spent_on_day`` is what the ledger's debits
-- took on ``spend_day`` (net of the refunds of that day), moved in the debit's own transaction under the
-- account lock (gateway/storage/ledger/moves.py); a lease or a send's hold never takes more than the
-- cap leaves of the day (gateway/storage/ledger/cap.py).
ALTER TABLE accounts
    ADD COLUMN daily_spend_cap BIGINT CHECK (daily_spend_cap > 0),
    ADD COLUMN spend_day DATE,
    ADD COLUMN spent_on_day BIGINT NOT NULL DEFAULT 0 CHECK (spent_on_day >= 0);
