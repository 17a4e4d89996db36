-- x402 settlements (POST /x402/settle): one row per transaction signature, written BEFORE the
-- transaction is broadcast, so a replayed settlement (the same signed transaction again, from anyone)
-- is refused without a second broadcast, whichever replica it reaches. A row whose preflight the node
-- refused ('rejected': nothing was sent) may be claimed again; any other status is final for settle.
-- Crediting is not recorded here: confirm-deposit and the watcher credit the deposit as any other.

CREATE TABLE x402_settlements (
    signature           TEXT PRIMARY KEY,          -- the transaction's first signature (the fee payer's)
    sponsored           BOOLEAN NOT NULL,          -- the service's key paid the fee
    fee_payer           TEXT NOT NULL,
    authorities         TEXT[] NOT NULL,           -- the transfer authorities confirm-deposit credits
    amount_base_units   BIGINT NOT NULL CHECK (amount_base_units > 0),
    client              TEXT,                      -- the caller's address, as the per-address limit saw it
    status              TEXT NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'submitted', 'confirmed', 'failed', 'rejected')),
    error               TEXT,                      -- the node's refusal or the on-chain error
    attempts            INTEGER NOT NULL DEFAULT 1,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
