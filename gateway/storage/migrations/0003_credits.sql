-- Credits: a cached balance on the account, and credit leases (replica-local spending blocks).
--
-- accounts.balance is a cache of sum(ledger_entries.amount), written in the same transaction as
-- every ledger entry, so reading a balance never sums the ledger. Every credit operation locks the
-- account row first (SELECT ... FOR UPDATE), which serialises replicas, deposit crediting and expiry
-- per account.
--
-- A lease is a hold on part of an account's balance, granted to one replica, which spends it
-- locally without a database round trip per request. Holds never exceed the balance:
--     sum(granted - used) over live leases  <=  balance
-- so a replica can never admit a call the balance does not cover. Usage of a lease that expired
-- before it was settled is dropped (the customer keeps those credits): a dead replica loses at
-- most its unflushed usage, never a deposit or a balance.

ALTER TABLE accounts
    ADD COLUMN balance              BIGINT NOT NULL DEFAULT 0 CHECK (balance >= 0),
    ADD COLUMN total_consumed       BIGINT NOT NULL DEFAULT 0 CHECK (total_consumed >= 0),
    ADD COLUMN low_balance_notified BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE credit_leases (
    id                  BIGSERIAL PRIMARY KEY,
    pubkey              TEXT NOT NULL REFERENCES accounts (pubkey),
    replica_id          TEXT NOT NULL,
    granted             BIGINT NOT NULL CHECK (granted >= 0),
    used                BIGINT NOT NULL DEFAULT 0 CHECK (used >= 0 AND used <= granted),
    flush_seq           BIGINT NOT NULL DEFAULT 0,  -- last settle applied: a retried flush is not charged twice
    expires_at          TIMESTAMPTZ NOT NULL,
    released            BOOLEAN NOT NULL DEFAULT false,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX credit_leases_live ON credit_leases (pubkey, expires_at) WHERE NOT released;

-- One usage row per admitted call; a refunded call keeps its row with credits 0 and refunded true.
ALTER TABLE usage_history
    ADD COLUMN refunded BOOLEAN NOT NULL DEFAULT false;

-- Expiry scans due batches across accounts.
CREATE INDEX credit_batches_due ON credit_batches (expires_at) WHERE remaining > 0;
