"""The pool of nodes as the operator runs it: the ``upstream-health`` actor that owns the nodes' health
(``health_actor.py``), and the operator's changes to the pool while the gateway runs (``store.py``,
written by ``gateway upstreams``). How each process uses the pool: :mod:`gateway.node.pool`."""
