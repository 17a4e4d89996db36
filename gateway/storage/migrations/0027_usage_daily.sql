-- Per-account, per-day (UTC), per-method totals of usage_history, kept by the writers of usage rows in
-- the same transaction as their insert (one upsert per distinct key per flush), so the account page's
-- chart reads a few rows instead of summing millions (docs/api.md, Usage totals; issue 51 item 6).
-- credits and calls are the sums of usage_history's columns; refunds the calls of refunded rows.
-- Kept past usage_history's retention: the purge deletes usage rows, never their totals.
CREATE TABLE usage_daily (
    pubkey      TEXT NOT NULL,
    day         DATE NOT NULL,
    method      TEXT NOT NULL,
    credits     BIGINT NOT NULL DEFAULT 0,
    calls       BIGINT NOT NULL DEFAULT 0,
    refunds     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (pubkey, day, method)
);

INSERT INTO usage_daily (pubkey, day, method, credits, calls, refunds)
SELECT pubkey, (created_at AT TIME ZONE 'UTC')::date, method, sum(credits), sum(calls),
       COALESCE(sum(calls) FILTER (WHERE refunded), 0)
FROM usage_history
GROUP BY 1, 2, 3;
