-- Webhooks: subscriptions and their durable delivery jobs (the tables of 0001, made usable).
--
-- A job row is written in the same transaction as the change that caused it (a deposit credited, a
-- deduction crossing the low-balance line, a key rotated, a batch near expiry), or by a source that
-- saw a transaction or a signal (unique per subscription and dedupe key, so a source that sees the
-- same thing twice adds one job). Dispatchers claim due jobs with FOR UPDATE SKIP LOCKED and hold
-- them under a lease (locked_until): a dispatcher that dies leaves the job to be claimed again once
-- its lease has passed, so a job is never lost and never delivered by two dispatchers at once.

ALTER TABLE webhooks
    ADD COLUMN status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'deleted')),
    ADD COLUMN paused_reason TEXT,
    ADD COLUMN deleted_at    TIMESTAMPTZ,
    ADD COLUMN secret_rotated_at TIMESTAMPTZ;
UPDATE webhooks SET status = CASE WHEN active THEN 'active' ELSE 'deleted' END;
ALTER TABLE webhooks DROP COLUMN active;
DROP INDEX IF EXISTS webhooks_by_account;
CREATE INDEX webhooks_by_account ON webhooks (pubkey) WHERE status <> 'deleted';
CREATE INDEX webhooks_by_filter ON webhooks (filter_type, filter_value) WHERE status = 'active';

ALTER TABLE delivery_jobs DROP CONSTRAINT delivery_jobs_status_check;
UPDATE delivery_jobs SET status = 'dead' WHERE status = 'failed';
ALTER TABLE delivery_jobs
    ADD CONSTRAINT delivery_jobs_status_check
        CHECK (status IN ('pending', 'delivering', 'delivered', 'dead', 'cancelled')),
    ADD COLUMN dedupe_key       TEXT,              -- e.g. the transaction signature of a watch
    ADD COLUMN locked_by        TEXT,              -- the dispatcher holding it
    ADD COLUMN locked_until     TIMESTAMPTZ,       -- its lease; past it, the job may be claimed again
    ADD COLUMN last_status      INTEGER,           -- the receiver's last HTTP status
    ADD COLUMN response_excerpt TEXT,              -- at most a few hundred characters of its body
    ADD COLUMN price            BIGINT NOT NULL DEFAULT 0 CHECK (price >= 0),    -- credits per delivery (signals)
    ADD COLUMN charged          BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0),  -- what the delivery was charged
    ADD COLUMN delivered_at     TIMESTAMPTZ;
CREATE UNIQUE INDEX delivery_jobs_dedupe ON delivery_jobs (webhook_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
DROP INDEX IF EXISTS delivery_jobs_due;
CREATE INDEX delivery_jobs_due ON delivery_jobs (next_attempt_at) WHERE status = 'pending';
CREATE INDEX delivery_jobs_leased ON delivery_jobs (locked_until) WHERE status = 'delivering';
CREATE INDEX delivery_jobs_by_webhook ON delivery_jobs (webhook_id, id DESC);
