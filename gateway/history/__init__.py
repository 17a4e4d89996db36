"""``getTransactionsForAddress``: the enriched history of an address."""
