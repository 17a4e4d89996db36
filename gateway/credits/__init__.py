"""Credits on a replica: the meter (replica-local leases), the metering stage and its refund rules,
deposit crediting.

The ledger itself is in PostgreSQL (:mod:`gateway.storage.ledger`, :mod:`gateway.storage.deposits`);
the plain values exchanged with it are in :mod:`gateway.core.credits`.
"""
