-- The access rules' rate (docs/api.md, "Access rules"): requests per second the account's API key and
-- session tokens may make together, below the account's own; NULL: no rate of the rules.
ALTER TABLE access_rules ADD COLUMN rate_limit_rps INTEGER CHECK (rate_limit_rps > 0);
