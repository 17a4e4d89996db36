"""The edge's limits and what its logs keep, on one stack for both modules (conftest.py): one start fewer."""
