"""The signal classifier's metric: how far behind the chain it is."""

from __future__ import annotations

from gateway.base.metrics import gauge

CLASSIFIER_LAG = gauge("gateway_signal_classifier_lag_slots", "Confirmed slots the signal classifier is behind")
