"""Credits on a replica: the meter (replica-local leases), the metering stage and its refund rules,
deposit crediting.

The ledger itself is in PostgreSQL (:mod:`gateway.storage.ledger`, shared by every feature that
charges; the deposits in :mod:`gateway.credits.store`);
the plain values exchanged with it are in :mod:`gateway.core.credits`.
"""
