"""Credit-metered Solana JSON-RPC gateway."""
