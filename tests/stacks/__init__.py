"""Tests that start whole stacks of their own (``gateway up``, tests/integration/service.py), each with the
settings or the faults it tests: two replicas, their stops and a restart, autoscaling, the edge's limits and
logs, a pool of devnodes, the metrics export. They are kept apart from tests/integration so that its shared
stack, idle meanwhile at about a third of a core, is stopped before these start."""
