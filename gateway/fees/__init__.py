"""``getPriorityFeeEstimate``: priority-fee suggestions from recent fees."""
