-- A delivery the receiver got is paid (docs/api.md, Webhooks: Billing of deliveries).
--
-- sent: some attempt of the delivery reached its receiver: the dispatcher had a connection to it (DNS,
-- TCP and TLS done) and wrote the request on it, whatever came next (an answer, a timeout, the
-- connection dropped unanswered). A paid delivery sent keeps its charge however it ends (dead,
-- cancelled by a delete, expired while paused); one never sent (every attempt a DNS, connect or TLS
-- failure, or a refused address) is refunded. Set with the attempt's outcome, never cleared. Every
-- answered delivery was sent.
ALTER TABLE delivery_jobs ADD COLUMN sent BOOLEAN NOT NULL DEFAULT false;
UPDATE delivery_jobs SET sent = true WHERE answered;
