-- Webhooks that pay their way and share the dispatchers fairly (docs/api.md, Webhooks).
--
-- answered: some attempt of the delivery got an HTTP answer from the receiver, whatever its status,
-- so the event reached it: a paid delivery answered keeps its charge; one never answered (connection
-- failures, timeouts before an answer, refused addresses) is refunded when it ends dead or is
-- cancelled. Set with the attempt's outcome, never cleared (a replay does not undo what was received).
ALTER TABLE delivery_jobs ADD COLUMN answered BOOLEAN NOT NULL DEFAULT false;
UPDATE delivery_jobs SET answered = true WHERE last_status IS NOT NULL;

-- consecutive_dead: the webhook's deliveries that ended dead since the last one delivered (or since it
-- was resumed); at webhook_pause_after_dead the webhook is paused, in the outcome's transaction.
ALTER TABLE webhooks ADD COLUMN consecutive_dead INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_dead >= 0);
