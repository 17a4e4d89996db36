"""x402 pay-per-request settlement: its terms, the settle endpoint and route, its storage."""
