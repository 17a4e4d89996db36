"""The per-account and per-address limits, as the one list (``gateway/features.py``) takes them: their
settings."""

from __future__ import annotations

from gateway.feature import Feature
from gateway.limits.settings import LimitSettings

FEATURE: Feature[object] = Feature("limits", settings=LimitSettings)
