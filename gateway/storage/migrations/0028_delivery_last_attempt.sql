-- When a delivery's last attempt ended (docs/api.md, A webhook's deliveries): set by the dispatcher in
-- the statement that writes the attempt's outcome (no statement of its own), shown by
-- GET /webhooks/{id}/deliveries. Null until an attempt's outcome was written; a nullable column
-- without a default, so adding it rewrites no row.
ALTER TABLE delivery_jobs ADD COLUMN last_attempt_at TIMESTAMPTZ;
