-- The live definitions of the webhook claim: what the dispatchers call (gateway/webhooks/store/jobs.py,
-- `claim`, `exchange` and `record`), read here beside the feature that calls them. Never run: the database gets
-- them from the migrations, which are append-only history, and each of these two is the last
-- CREATE FUNCTION of its name there (migration 0029; the claim's earlier ones are 0016, 0018 and 0024,
-- and 0024's stays defined for a dispatcher of the previous release). tests/webhooks/test_claim_sql.py
-- fails when this file and the migrations, or the migrated database, differ.
--
-- Changing the claim: a new migration under gateway/storage/migrations/ with its CREATE FUNCTION (or
-- CREATE OR REPLACE), then this file made the same. Why each part is as it is: migrations 0016 (the claim
-- lock, leases), 0018 (the accounts' fair share), 0024 (parked jobs of paused subscriptions) and 0029
-- (outcomes written by the claim, what each claim cost).

CREATE FUNCTION write_delivery_outcomes(
    dispatcher TEXT, ids BIGINT[], attempts INT[], results TEXT[], delays FLOAT8[], statuses INT[],
    errors TEXT[], excerpts TEXT[], sent BOOLEAN[], pause_after INT
) RETURNS SETOF BIGINT
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    -- The outcomes, and the streaks of their subscriptions in outcome order (a delivered job resets its
    -- subscription's streak; the dead ones after the last delivered add to it; at pause_after, when it is
    -- more than 0, the subscription is paused). A dead job that was charged and never sent is left to the
    -- caller (its refund needs the account lock, taken before any job's). Subscriptions are locked in id
    -- order, as every writer of several locks them.
    RETURN QUERY
    WITH u AS (
        SELECT * FROM unnest($2, $3, $4, $5, $6, $7, $8, $9)
             WITH ORDINALITY AS u(id, attempts, result, delay, http_status, error, excerpt, sent, n)
    ), done AS (
        UPDATE delivery_jobs j
        SET status = CASE u.result WHEN 'retry' THEN 'pending' ELSE u.result END,
            next_attempt_at = CASE WHEN u.result = 'retry' THEN now() + u.delay * interval '1 second'
                                   ELSE j.next_attempt_at END,
            delivered_at = CASE WHEN u.result = 'delivered' THEN now() ELSE j.delivered_at END,
            last_status = u.http_status, last_error = u.error, response_excerpt = u.excerpt, last_attempt_at = now(),
            answered = j.answered OR u.http_status IS NOT NULL,
            sent = j.sent OR u.sent OR u.http_status IS NOT NULL,
            locked_by = NULL, locked_until = NULL
        FROM u
        WHERE j.id = u.id AND j.status = 'delivering' AND j.locked_by = $1 AND j.attempts = u.attempts
              AND (u.result <> 'dead' OR j.charged = 0 OR j.sent OR u.sent OR u.http_status IS NOT NULL)
        RETURNING j.id, j.webhook_id, u.result, u.error, u.n
    ), ordered AS (
        SELECT d.*, max(d.n) FILTER (WHERE d.result = 'delivered') OVER (PARTITION BY d.webhook_id) AS last_delivered
        FROM done d
    ), outcomes AS (
        SELECT o.webhook_id, bool_or(o.result = 'delivered') AS reset,
               count(*) FILTER (WHERE o.result = 'dead' AND o.n > COALESCE(o.last_delivered, 0))::int AS dead,
               (array_agg(o.error ORDER BY o.n DESC) FILTER (WHERE o.result = 'dead'))[1] AS last_error
        FROM ordered o GROUP BY o.webhook_id
    ), locked AS (
        SELECT w.id, s.reset, s.dead, s.last_error FROM webhooks w JOIN outcomes s ON s.webhook_id = w.id
        WHERE s.dead > 0 OR (s.reset AND w.consecutive_dead > 0)
        ORDER BY w.id
        FOR UPDATE OF w
    ), streaked AS (
        UPDATE webhooks w
        SET consecutive_dead = CASE WHEN k.reset THEN 0 ELSE w.consecutive_dead END + k.dead,
            status = CASE WHEN w.status = 'active' AND k.dead > 0 AND $10 > 0
                               AND CASE WHEN k.reset THEN 0 ELSE w.consecutive_dead END + k.dead >= $10
                          THEN 'paused' ELSE w.status END,
            paused_reason = CASE WHEN w.status = 'active' AND k.dead > 0 AND $10 > 0
                                      AND CASE WHEN k.reset THEN 0 ELSE w.consecutive_dead END + k.dead >= $10
                                 THEN format('%s deliveries in a row ended dead (the last: %s): fix the receiver, '
                                             'then POST /webhooks/%s/resume',
                                             CASE WHEN k.reset THEN 0 ELSE w.consecutive_dead END + k.dead,
                                             k.last_error, w.id)
                                 ELSE w.paused_reason END
        FROM locked k
        WHERE w.id = k.id
        RETURNING w.id
    )
    SELECT d.id FROM done d;
END
$$;

CREATE FUNCTION claim_delivery_jobs(
    dispatcher TEXT, lease_s FLOAT8, max_jobs INT, per_webhook INT, scan_factor INT, per_account INT,
    -- The dispatcher's claims (job id, attempts) whose attempt is over and whose outcome is not written
    -- yet: no longer out to their receiver, they hold no slot.
    finished_ids BIGINT[], finished_attempts INT[],
    -- The delivery slots of every dispatcher together (workers): each account's share is cut from them.
    total_slots INT,
    -- Outcomes of the dispatcher's attempts, written first (write_delivery_outcomes' arguments).
    done_ids BIGINT[], done_attempts INT[], done_results TEXT[], done_delays FLOAT8[], done_statuses INT[],
    done_errors TEXT[], done_excerpts TEXT[], done_sent BOOLEAN[], pause_after INT
) RETURNS TABLE (
    -- An outcome written: its job's id, every other column null; a job claimed: all of them.
    id BIGINT, written BOOLEAN, webhook_id BIGINT, pubkey TEXT, url TEXT, secret TEXT, event_type TEXT,
    payload TEXT, created_at TIMESTAMPTZ, attempts INT, price BIGINT, charged BIGINT, suspended BOOLEAN
)
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF cardinality($10) > 0 THEN
        RETURN QUERY SELECT o, true, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
                            NULL::timestamptz, NULL::int, NULL::bigint, NULL::bigint, NULL::boolean
                     FROM write_delivery_outcomes($1, $10, $11, $12, $13, $14, $15, $16, $17, $18) o;
    END IF;
    IF $3 <= 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1475018753);  -- any constant: only claims take it, one at a time
    UPDATE delivery_jobs SET status = 'pending', locked_by = NULL, locked_until = NULL
    WHERE id IN (SELECT j.id FROM delivery_jobs j WHERE j.status = 'delivering' AND j.locked_until < now()
                 FOR UPDATE SKIP LOCKED);
    -- Park what the claim would step over: due jobs of paused subscriptions (migration 0024).
    UPDATE delivery_jobs SET next_attempt_at = 'infinity'
    WHERE id IN (
        SELECT j.id FROM webhooks w JOIN delivery_jobs j ON j.webhook_id = w.id
        WHERE w.status = 'paused' AND j.status = 'pending' AND j.next_attempt_at <= now()
        LIMIT $3 * $5 * 4
        FOR UPDATE OF j SKIP LOCKED
        FOR SHARE OF w SKIP LOCKED
    );
    -- For the claim only (the statements above keep their plans): see 3. above.
    PERFORM set_config('enable_bitmapscan', 'off', true);
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    RETURN QUERY
    WITH out_jobs AS (  -- counted per subscription before any subscription is looked up
        SELECT j.webhook_id, count(*) AS n
        FROM delivery_jobs j
        WHERE j.status = 'delivering'
          AND NOT (j.locked_by = $1 AND (j.id, j.attempts) IN (SELECT * FROM unnest($7, $8)))
        GROUP BY j.webhook_id
    ), busy AS (
        SELECT o.webhook_id, w.pubkey, o.n FROM out_jobs o JOIN webhooks w ON w.id = o.webhook_id
    ), busy_accounts AS (
        SELECT b.pubkey, sum(b.n) AS n FROM busy b GROUP BY b.pubkey
    ), busy_share AS (  -- the share while only the accounts with deliveries out count: the scan skips those at it
        SELECT least($6::bigint, greatest(1, $9::bigint / ((SELECT count(*) FROM busy_accounts) + 1))) AS cap
    ), full_hooks AS (  -- subscriptions at their cap, and those of accounts at their share
        SELECT b.webhook_id AS id FROM busy b WHERE b.n >= $4
        UNION ALL
        SELECT w.id FROM busy_accounts a JOIN busy_share s ON a.n >= s.cap JOIN webhooks w ON w.pubkey = a.pubkey
        WHERE w.status <> 'deleted'
    ), due AS (
        SELECT j.id, j.webhook_id, j.next_attempt_at
        FROM delivery_jobs j
        WHERE j.status = 'pending' AND j.next_attempt_at <= now()
          AND j.webhook_id NOT IN (SELECT f.id FROM full_hooks f)
        ORDER BY j.next_attempt_at
        LIMIT $3 * $5
        FOR UPDATE OF j SKIP LOCKED
    ), hooks AS (  -- each active subscription of the window once, with its owner's standing
        SELECT w.id, w.pubkey, w.url, w.secret,
               COALESCE((SELECT a.status = 'suspended' FROM accounts a WHERE a.pubkey = w.pubkey), false) AS suspended
        FROM webhooks w
        WHERE w.id IN (SELECT d.webhook_id FROM due d) AND w.status = 'active'
    ), share AS (  -- and with the accounts due in this claim's window too
        SELECT least(min(s.cap), greatest(1, $9::bigint / (count(*) + 1))) AS cap
        FROM (SELECT a.pubkey FROM busy_accounts a UNION SELECT h.pubkey FROM hooks h) accounts, busy_share s
    ), within_webhook AS (
        SELECT r.id, r.pubkey, r.next_attempt_at FROM (
            SELECT d.id, h.pubkey, d.next_attempt_at,
                   COALESCE(b.n, 0) + row_number() OVER (PARTITION BY d.webhook_id ORDER BY d.next_attempt_at, d.id)
                       AS slot
            FROM due d JOIN hooks h ON h.id = d.webhook_id LEFT JOIN busy b ON b.webhook_id = d.webhook_id
        ) r
        WHERE r.slot <= $4
    ), picked AS (
        SELECT r.id FROM (
            SELECT d.id, d.next_attempt_at,
                   COALESCE(a.n, 0) + row_number() OVER (PARTITION BY d.pubkey ORDER BY d.next_attempt_at, d.id) AS slot
            FROM within_webhook d LEFT JOIN busy_accounts a ON a.pubkey = d.pubkey
        ) r
        WHERE r.slot <= (SELECT s.cap FROM share s)
        ORDER BY r.next_attempt_at, r.id
        LIMIT $3
    ), claimed AS (
        UPDATE delivery_jobs j
        SET status = 'delivering', locked_by = $1, locked_until = now() + $2 * interval '1 second',
            attempts = j.attempts + 1
        FROM picked p
        WHERE j.id = p.id
        RETURNING j.id, j.webhook_id, j.event_type, j.payload::text AS payload, j.created_at, j.attempts, j.price,
                  j.charged
    )
    SELECT c.id, false, c.webhook_id, h.pubkey, h.url, h.secret, c.event_type, c.payload, c.created_at,
           c.attempts, c.price, c.charged, h.suspended
    FROM claimed c JOIN hooks h ON h.id = c.webhook_id;
END
$$;
