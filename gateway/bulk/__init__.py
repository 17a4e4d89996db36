"""Bulk lookups (``/bulk/*``): item rules, metering, endpoints and routes."""
