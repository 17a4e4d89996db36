"""The signal classifier's metric: how far behind the chain it is.

Declared with the kernel's :mod:`gateway.metrics` (which installs every declared metric) and importing
nothing else: every process declares them before it installs its backend, an actor's too
(``gateway/runtime/metrics.py``). Names and labels are docs/operations.md's.
"""

from __future__ import annotations

from gateway.metrics import gauge

CLASSIFIER_LAG = gauge("gateway_signal_classifier_lag_slots", "Confirmed slots the signal classifier is behind")
