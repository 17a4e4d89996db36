"""The suite's two tiers, and how ``make test`` runs them on two workers at once (docs/development.md).

- **stack**: the folders whose tests start whole services as an operator does (``gateway up`` in a subprocess,
  a Ray cluster of two nodes, a foreign client's suite against a stack): ``STACK_FOLDERS``. Each test is marked
  ``stack``; ``make test-fast`` leaves them out (``-m "not stack"``).
- **process**: everything else: in-process gateways, the devnode, embedded PostgreSQL and Redis, Ray drivers and
  devnodes in subprocesses. Each starts only what its fixtures ask for.

Under pytest-xdist (``make test``: ``-n 2 --dist loadscope``) the unit of work a worker takes is this module's
:class:`TierScheduling`'s: the whole stack tier is one unit, which one worker runs in series while the other takes
the process tier a module at a time. So two stacks never run at once (idle, one takes a third of a core), and a
module's fixtures start on one worker only. The stack tier comes first in the order, so that its worker starts on it
at once and the process tier fills the other worker around it. In one process (no ``-n``) the stack tier runs last
instead, so that a broken unit fails in minutes.

Hand-written beside xdist's own ``loadgroup``: that one carries a test's group in its node id, which pytest 9.2's
structured node ids no longer let a plugin change, so every test was scheduled on its own (pytest-xdist issue
1386); the scheduler here reads the tier from the node id's path instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

#: The stack tier's folders, under tests/.
STACK_FOLDERS = frozenset({"stacks", "cluster", "integration", "foreign"})
STACK_UNIT = "stack tier"
_TESTS = Path(__file__).parent


def tier_of_id(nodeid: str) -> str:
    """``stack`` or ``process``, by the test's folder under tests/ (``nodeid`` as pytest names it from the root)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return "stack" if len(parts) > 2 and parts[0] == "tests" and parts[1] in STACK_FOLDERS else "process"


def unit_of(nodeid: str) -> str:
    """The unit of work a worker takes ``nodeid`` in: the stack tier whole, else the test's module."""
    return STACK_UNIT if tier_of_id(nodeid) == "stack" else nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stack: list[pytest.Item] = []
    rest: list[pytest.Item] = []
    for item in items:
        if tier_of_id(item.nodeid) == "stack":
            item.add_marker(pytest.mark.stack)
            stack.append(item)
        else:
            rest.append(item)
    items[:] = stack + rest if hasattr(config, "workerinput") else rest + stack


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """:class:`TierScheduling` for ``--dist loadscope``; xdist's own for any other mode."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler.loadscope import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        """xdist's scheduling by scope, the scope being :func:`unit_of`'s."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return TierScheduling(config, log)
