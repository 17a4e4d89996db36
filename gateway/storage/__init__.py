"""Durable state in PostgreSQL: connection, versioned migrations, and the stores built on them."""
