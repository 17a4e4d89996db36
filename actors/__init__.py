"""Ray actors: one module per owner of state."""
