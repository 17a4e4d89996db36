-- A dispatcher's claim as one server-side function, so it is one round trip instead of three (the lock
-- with the release of passed leases, the claim, the commit): the claim lock is held only while it runs.
-- gateway/webhooks/jobs.py (claim) says what it does and why it reads the queue this way.
--
-- Each statement of a VOLATILE function takes a new snapshot, so the claim sees every claim committed
-- before it got the lock, as the three statements did. Its commit does not wait for the WAL flush: a
-- claim lost in a crash only delivers its jobs again (deliveries are at least once; docs/api.md), and
-- the next synchronous commit (a charge, a refund) flushes it first.
CREATE FUNCTION claim_delivery_jobs(
    dispatcher TEXT, lease_s FLOAT8, max_jobs INT, per_webhook INT, scan_factor INT, per_account INT,
    -- The dispatcher's claims (job id, attempts) whose attempt is over and whose outcome is not written
    -- yet: no longer out to their receiver, they hold no slot.
    finished_ids BIGINT[], finished_attempts INT[]
) RETURNS TABLE (
    id BIGINT, webhook_id BIGINT, pubkey TEXT, url TEXT, secret TEXT, event_type TEXT, payload TEXT,
    created_at TIMESTAMPTZ, attempts INT, price BIGINT, charged BIGINT
)
LANGUAGE plpgsql VOLATILE
-- A queue grows faster than autovacuum re-analyses it: with statistics from when it was short, the
-- planner sorts every due job instead of reading the due index in order.
SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pg_advisory_xact_lock(1475018753);  -- any constant: only claims take it, one at a time
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE delivery_jobs SET status = 'pending', locked_by = NULL, locked_until = NULL
    WHERE status = 'delivering' AND locked_until < now();
    RETURN QUERY
    WITH busy AS (
        SELECT j.webhook_id, min(w.pubkey) AS pubkey, count(*) AS n
        FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id
        WHERE j.status = 'delivering'
          AND NOT (j.locked_by = $1 AND (j.id, j.attempts) IN (SELECT * FROM unnest($7, $8)))
        GROUP BY j.webhook_id
    ), busy_accounts AS (
        SELECT b.pubkey, sum(b.n) AS n FROM busy b GROUP BY b.pubkey
    ), due AS (
        SELECT j.id, j.webhook_id, j.next_attempt_at,
               (SELECT w.pubkey FROM webhooks w WHERE w.id = j.webhook_id) AS pubkey
        FROM delivery_jobs j
        WHERE j.status = 'pending' AND j.next_attempt_at <= now()
          AND j.webhook_id NOT IN (SELECT b.webhook_id FROM busy b WHERE b.n >= $4)
          AND (SELECT w.status = 'active' AND w.pubkey NOT IN (SELECT a.pubkey FROM busy_accounts a WHERE a.n >= $6)
               FROM webhooks w WHERE w.id = j.webhook_id)
        ORDER BY j.next_attempt_at
        LIMIT $3 * $5
        FOR UPDATE OF j SKIP LOCKED
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
        WHERE r.slot <= $6
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
