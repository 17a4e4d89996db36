-- A usage row may stand for several deliveries of one connection: a WebSocket's notifications and
-- signal events are recorded one row per connection and method per settlement (about a second), with
-- `calls` the deliveries and `credits` their sum, instead of a row each (docs/api.md, History entries).
ALTER TABLE usage_history
    ADD COLUMN calls INTEGER NOT NULL DEFAULT 1 CHECK (calls >= 1);
