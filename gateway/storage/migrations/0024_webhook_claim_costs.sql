-- What every claim paid since 0018 and 0020, taken off with the same caps, shares and parking
-- (bench/README.md, Webhooks, 2026-11-25: PostgreSQL 43-54 us of CPU per delivery before them, 263-390 after).
--
-- 1. Parking read the whole queue on every claim. Its statement joined every pending due job to its
--    subscription to find those of subscriptions not active; with none paused (the usual case) the plan
--    still read delivery_jobs from its start until the first pending due row, past every delivered and
--    dead row (pg_stat_statements in bench.webhooks: half of PostgreSQL's time, 3,000+ buffers a claim).
--    It now starts from the paused subscriptions (index webhooks_paused) and reads each one's due jobs
--    from the index below, so a claim with nothing paused reads one index page. Deleted subscriptions
--    have no waiting jobs (their deletion cancels them), so only paused ones are looked at.
-- 2. The waiting index of 0020 is keyed (webhook_id, next_attempt_at), so a paused subscription's due
--    jobs are a range of it (its parked ones, at infinity, are past the range), and the lifecycle cap
--    still counts a subscription's waiting jobs from it.
-- 3. The claim returns whether the job's account is suspended, so the dispatcher no longer asks
--    PostgreSQL for the account's status before each free delivery (a round trip and a pool checkout
--    per delivery); a suspended account's job still takes the path that pauses its subscription.
DROP INDEX delivery_jobs_waiting;
CREATE INDEX delivery_jobs_waiting ON delivery_jobs (webhook_id, next_attempt_at)
    WHERE status IN ('pending', 'delivering');

DROP FUNCTION claim_delivery_jobs(TEXT, FLOAT8, INT, INT, INT, INT, BIGINT[], INT[], INT);

CREATE FUNCTION claim_delivery_jobs(
    dispatcher TEXT, lease_s FLOAT8, max_jobs INT, per_webhook INT, scan_factor INT, per_account INT,
    -- The dispatcher's claims (job id, attempts) whose attempt is over and whose outcome is not written
    -- yet: no longer out to their receiver, they hold no slot.
    finished_ids BIGINT[], finished_attempts INT[],
    -- The delivery slots of every dispatcher together (workers): each account's share is cut from them.
    total_slots INT
) RETURNS TABLE (
    id BIGINT, webhook_id BIGINT, pubkey TEXT, url TEXT, secret TEXT, event_type TEXT, payload TEXT,
    created_at TIMESTAMPTZ, attempts INT, price BIGINT, charged BIGINT, suspended BOOLEAN
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
    -- Park what the claim would step over: due jobs of paused subscriptions. Both rows are locked
    -- (skipping locked ones, so a claim never waits): a resume that committed meanwhile is seen.
    UPDATE delivery_jobs SET next_attempt_at = 'infinity'
    WHERE id IN (
        SELECT j.id FROM webhooks w JOIN delivery_jobs j ON j.webhook_id = w.id
        WHERE w.status = 'paused' AND j.status = 'pending' AND j.next_attempt_at <= now()
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
                  j.attempts, j.price, j.charged,
                  COALESCE((SELECT a.status = 'suspended' FROM accounts a WHERE a.pubkey = w.pubkey), false)
    )
    SELECT * FROM claimed;
END
$$;
