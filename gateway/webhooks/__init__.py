"""Webhooks: the events (``events``: their one list and payloads; pure), the rules (prices, signatures,
retries; pure), subscriptions' management and routes, the sources that turn what happens into delivery
jobs, the dispatcher that delivers them, and their tables (``store``: subscriptions, jobs, the sources'
jobs, refunds, the claim's SQL)."""
