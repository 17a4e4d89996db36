-- The access rules' webhook actions (docs/api.md, "Access rules"): which of the webhook management
-- actions (create, list, delete, pause, resume, replay, rotate-secret, deliveries) the account's API key
-- and session tokens may take while the account has any rule; empty: none of them. An account without
-- rules manages its webhooks with any credential, and the wallet's own proof is never bound.
ALTER TABLE access_rules ADD COLUMN webhooks TEXT[] NOT NULL DEFAULT '{}';
