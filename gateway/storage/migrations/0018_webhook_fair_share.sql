-- Every account's share of the delivery slots, and paused subscriptions' jobs out of the claim's way
-- (docs/api.md, Webhooks: Deliveries; gateway/webhooks/jobs.py, claim, says why).
--
-- 1. The claim takes one more argument, the slots of all dispatchers (``total_slots``), and caps each
--    account at ``least(per_account, total_slots / (accounts + 1))``, where ``accounts`` counts those
--    with deliveries out or due in the claim's window: however many accounts point at receivers that
--    never answer, a share of the slots stays free for one more account.
-- 2. The claim parks the due jobs of subscriptions that are not active (``next_attempt_at`` =
--    infinity, a bounded number per claim), so later claims stop stepping over them; a resume makes
--    them due again (gateway/webhooks/store.py, resume), and the hourly retention makes due again any
--    parked job whose subscription is active (gateway/webhooks/jobs.py, unpark).
-- 3. ``webhooks.paused_at``: when a subscription was paused, kept by a trigger whatever pauses it, so
--    that the retention cancels the jobs of one paused longer than ``webhook_paused_retention_days``.
-- 4. ``webhook_actions``: an account's replays and resumes of the last minute, to bound them.
ALTER TABLE webhooks ADD COLUMN paused_at TIMESTAMPTZ;
UPDATE webhooks SET paused_at = now() WHERE status = 'paused';

CREATE FUNCTION webhooks_paused_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'paused' AND OLD.status IS DISTINCT FROM 'paused' THEN
        NEW.paused_at := now();
    ELSIF NEW.status <> 'paused' THEN
        NEW.paused_at := NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER webhooks_paused_at BEFORE UPDATE OF status ON webhooks
    FOR EACH ROW EXECUTE FUNCTION webhooks_paused_at();
CREATE INDEX webhooks_paused ON webhooks (paused_at) WHERE status = 'paused';

DROP FUNCTION claim_delivery_jobs(TEXT, FLOAT8, INT, INT, INT, INT, BIGINT[], INT[]);

CREATE FUNCTION claim_delivery_jobs(
    dispatcher TEXT, lease_s FLOAT8, max_jobs INT, per_webhook INT, scan_factor INT, per_account INT,
    -- The dispatcher's claims (job id, attempts) whose attempt is over and whose outcome is not written
    -- yet: no longer out to their receiver, they hold no slot.
    finished_ids BIGINT[], finished_attempts INT[],
    -- The delivery slots of every dispatcher together (workers): each account's share is cut from them.
    total_slots INT
) RETURNS TABLE (
    id BIGINT, webhook_id BIGINT, pubkey TEXT, url TEXT, secret TEXT, event_type TEXT, payload TEXT,
    created_at TIMESTAMPTZ, attempts INT, price BIGINT, charged BIGINT
)
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pg_advisory_xact_lock(1475018753);  -- any constant: only claims take it, one at a time
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE delivery_jobs SET status = 'pending', locked_by = NULL, locked_until = NULL
    WHERE status = 'delivering' AND locked_until < now();
    -- Park what the claim would step over: due jobs of subscriptions not active. Both rows are locked
    -- (skipping locked ones, so a claim never waits): a resume that committed meanwhile is seen.
    UPDATE delivery_jobs SET next_attempt_at = 'infinity'
    WHERE id IN (
        SELECT j.id FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id
        WHERE j.status = 'pending' AND j.next_attempt_at <= now() AND w.status <> 'active'
        LIMIT $3 * $5 * 4
        FOR UPDATE OF j SKIP LOCKED
        FOR SHARE OF w SKIP LOCKED
    );
    RETURN QUERY
    WITH busy AS (
        SELECT j.webhook_id, min(w.pubkey) AS pubkey, count(*) AS n
        FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id
        WHERE j.status = 'delivering'
          AND NOT (j.locked_by = $1 AND (j.id, j.attempts) IN (SELECT * FROM unnest($7, $8)))
        GROUP BY j.webhook_id
    ), busy_accounts AS (
        SELECT b.pubkey, sum(b.n) AS n FROM busy b GROUP BY b.pubkey
    ), busy_share AS (  -- the share while only the accounts with deliveries out count: the scan skips those at it
        SELECT least($6::bigint, greatest(1, $9::bigint / ((SELECT count(*) FROM busy_accounts) + 1))) AS cap
    ), due AS (
        SELECT j.id, j.webhook_id, j.next_attempt_at,
               (SELECT w.pubkey FROM webhooks w WHERE w.id = j.webhook_id) AS pubkey
        FROM delivery_jobs j
        WHERE j.status = 'pending' AND j.next_attempt_at <= now()
          AND j.webhook_id NOT IN (SELECT b.webhook_id FROM busy b WHERE b.n >= $4)
          AND (SELECT w.status = 'active'
                      AND w.pubkey NOT IN (SELECT a.pubkey FROM busy_accounts a, busy_share s WHERE a.n >= s.cap)
               FROM webhooks w WHERE w.id = j.webhook_id)
        ORDER BY j.next_attempt_at
        LIMIT $3 * $5
        FOR UPDATE OF j SKIP LOCKED
    ), share AS (  -- and with the accounts due in this claim's window too
        SELECT least(min(s.cap), greatest(1, $9::bigint / (count(*) + 1))) AS cap
        FROM (SELECT a.pubkey FROM busy_accounts a UNION SELECT d.pubkey FROM due d) accounts, busy_share s
    ), within_webhook AS (
        SELECT r.id, r.pubkey, r.next_attempt_at FROM (
            SELECT d.id, d.pubkey, d.next_attempt_at,
                   COALESCE((SELECT b.n FROM busy b WHERE b.webhook_id = d.webhook_id), 0)
                   + row_number() OVER (PARTITION BY d.webhook_id ORDER BY d.next_attempt_at, d.id) AS slot
            FROM due d
        ) r
        WHERE r.slot <= $4
    ), picked AS (
        SELECT r.id FROM (
            SELECT d.id, d.next_attempt_at,
                   COALESCE((SELECT a.n FROM busy_accounts a WHERE a.pubkey = d.pubkey), 0)
                   + row_number() OVER (PARTITION BY d.pubkey ORDER BY d.next_attempt_at, d.id) AS slot
            FROM within_webhook d
        ) r
        WHERE r.slot <= (SELECT s.cap FROM share s)
        ORDER BY r.next_attempt_at, r.id
        LIMIT $3
    ), claimed AS (
        UPDATE delivery_jobs j
        SET status = 'delivering', locked_by = $1, locked_until = now() + $2 * interval '1 second',
            attempts = j.attempts + 1
        FROM picked p, webhooks w
        WHERE j.id = p.id AND w.id = j.webhook_id
        RETURNING j.id, j.webhook_id, w.pubkey, w.url, w.secret, j.event_type, j.payload::text, j.created_at,
                  j.attempts, j.price, j.charged
    )
    SELECT * FROM claimed;
END
$$;

-- 4. Replays and resumes per account (gateway/webhooks/store.py, take_action): each one's time, kept
--    for the window it counts in only, so the table holds at most the limit's rows per account.
CREATE TABLE webhook_actions (
    pubkey  TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_actions_by_account ON webhook_actions (pubkey, at);
