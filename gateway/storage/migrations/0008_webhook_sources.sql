-- Where the webhook sources resume (gateway/webhooks/sources.py, run by the webhook-watcher actor).
--
-- A transaction watch follows each watched address (an account, a program id, an owner's key) and
-- polls getSignaturesForAddress until its cursor: the newest signature whose jobs are written. The
-- cursor moves in the same transaction as the jobs, so a restart resumes there: what happened while
-- the watcher was down is caught up, and nothing is written twice (the jobs' dedupe key is the
-- signature as well). A cursor is per address, shared by every subscription watching it.
CREATE TABLE webhook_watch_cursors (
    address         TEXT PRIMARY KEY,
    last_signature  TEXT NOT NULL,
    last_slot       BIGINT,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The signal follower's position in the signal log: the id of the last stream entry whose jobs are
-- written (moved in the same transaction as them). One row per stream followed.
CREATE TABLE webhook_source_positions (
    source          TEXT PRIMARY KEY,   -- the stream's key, e.g. signals:events
    position        TEXT NOT NULL,      -- a stream id, <slot>-<n>
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
