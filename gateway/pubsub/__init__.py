"""The WebSocket surface behind the transport: shared upstream subscriptions and per-connection sessions."""
