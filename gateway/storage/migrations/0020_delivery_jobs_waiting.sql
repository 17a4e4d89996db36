-- The jobs waiting (pending or out) of one subscription, for the cap on queued lifecycle events
-- (gateway/storage/webhook_events.py, enqueue_lifecycle): counted without reading its delivered ones.
CREATE INDEX delivery_jobs_waiting ON delivery_jobs (webhook_id) WHERE status IN ('pending', 'delivering');
