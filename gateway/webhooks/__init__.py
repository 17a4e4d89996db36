"""Webhooks: subscriptions' management (``management``), the sources that turn what happens into
delivery jobs, and the dispatcher that delivers them. The rules they share are pure, in
:mod:`gateway.webhooks.rules`; their tables are in :mod:`gateway.storage`."""
