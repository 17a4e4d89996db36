"""The per-account and per-address limits, as the one list (``gateway/app/features.py``) takes them: their
settings."""

from __future__ import annotations

from gateway.limits.settings import LimitSettings
from gateway.pipeline.declaration import Feature

FEATURE: Feature[object] = Feature("limits", settings=LimitSettings)
