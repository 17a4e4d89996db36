-- The operator's changes to the pool of nodes while the gateway runs (`gateway upstreams add|remove|cordon|
-- uncordon`, docs/operations.md): one row per node name the operator touched. The pool is the configured
-- nodes (settings `upstreams`) less those `removed`, plus those added here (`node`: the whole entry, its URLs
-- and headers included, as the settings would hold them), each `cordoned` or not. The `upstream-health` actor
-- reads this table every half second; each change is also an `operator_actions` row naming the node only.
CREATE TABLE upstream_changes (
    name        TEXT PRIMARY KEY,
    node        JSONB,                      -- an added node's entry; null for a configured node
    removed     BOOLEAN NOT NULL DEFAULT false,
    cordoned    TEXT,                       -- the reason, while cordoned
    added       BIGSERIAL,                  -- added nodes join the pool in this order, after the configured ones
    changed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (
    'credit', 'debit', 'suspend', 'resume', 'limits', 'webhook_replay',
    'upstream_add', 'upstream_remove', 'upstream_cordon', 'upstream_uncordon'
));
