"""JSON Schema patterns shared by the request models of several features (docs/api.md)."""

BASE58_KEY = "^[1-9A-HJ-NP-Za-km-z]{32,44}$"
BASE58_SIGNATURE = "^[1-9A-HJ-NP-Za-km-z]{64,88}$"
SIGNAL_ID = "^[0-9]{1,20}-[0-9]{1,20}$"
