-- Retention of the per-call log and of settled sends: rows older than usage_retention_days and
-- send_retention_days are deleted in batches, hourly, by the send-reconciler actor
-- (gateway/credits/retention.py). A pending send is never deleted.
--
-- usage_history takes thousands of rows a second, in time order: a BRIN index on created_at (a few
-- pages, nearly free to keep current) finds the old block ranges without adding a B-tree's cost to
-- every insert of the settle.
CREATE INDEX usage_history_created_brin ON usage_history USING brin (created_at);

-- Settled sends by settlement time (pending ones have none and are never deleted).
CREATE INDEX sends_settled ON sends (settled_at) WHERE status <> 'pending';
