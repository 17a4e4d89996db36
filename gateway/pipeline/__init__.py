"""The request pipeline: its stages, their HTTP adapters and a feature's declaration."""
