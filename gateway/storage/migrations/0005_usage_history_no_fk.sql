-- usage_history is the per-call log: one row per admitted call, thousands of rows per second under
-- load (a batch of 100 is 100 rows). Its foreign key to accounts fired a referential-integrity check
-- per row, about half of what the insert cost PostgreSQL. Every row is written by the lease settle
-- (gateway/credits/leases.py), which holds the account row locked in the same transaction, and
-- accounts are never deleted, so the key guarded nothing the writer does not already guarantee.
ALTER TABLE usage_history DROP CONSTRAINT IF EXISTS usage_history_pubkey_fkey;
