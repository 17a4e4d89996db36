"""Signals: the classifier that turns confirmed blocks into signal events in the signal log (one per
cluster, run by :mod:`gateway.signals.classifier_actor`), and the feed through which each replica follows that
log and hands new events to its listeners. The rules are pure (:mod:`gateway.signals.rules`); the log is
Redis (:mod:`gateway.signals.store`).
"""
