"""The callers: the entry every request goes through and the account services it asks."""
