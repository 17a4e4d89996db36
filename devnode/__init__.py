"""A local Solana node backed by LiteSVM (it never imports gateway/ or actors/)."""
