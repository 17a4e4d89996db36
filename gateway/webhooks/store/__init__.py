"""Webhooks' tables (PostgreSQL): the subscriptions, their delivery jobs (and the claim's live SQL,
``claim.sql``), the jobs the sources write with their positions, and the refunds of deliveries never
received. The only modules of ``gateway.webhooks`` that talk to a store's driver."""
