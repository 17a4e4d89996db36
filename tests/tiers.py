"""The suite's two tiers, and how ``make test`` runs them on two workers at once (docs/development.md).

- **stack**: the folders whose tests start whole services as an operator does (``gateway up`` in a subprocess,
  a Ray cluster of two nodes, a foreign client's suite against a stack): ``STACK_FOLDERS``. Each test is marked
  ``stack``; ``make test-fast`` leaves them out (``-m "not stack"``).
- **process**: everything else: in-process gateways, the devnode, embedded PostgreSQL and Redis, Ray drivers and
  devnodes in subprocesses. Each starts only what its fixtures ask for.

Under pytest-xdist with ``--dist loadgroup`` (``make test``) every stack test is in one group, ``stack``, which one
worker runs in series while the other takes the process tier module by module: two stacks never run at once
(idle, one takes a third of a core), and a module's fixtures start on one worker only. The stack group is put first
in the order, so that it starts at once and the process tier fills the other worker around it. In one process
(no ``-n``) the stack tier runs last instead, so that a broken unit fails in minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: The stack tier's folders, under tests/.
STACK_FOLDERS = frozenset({"stacks", "cluster", "integration", "foreign"})
STACK_GROUP = "stack"
_TESTS = Path(__file__).parent


def tier_of(path: Path) -> str:
    """``stack`` or ``process``, by the test file's folder under tests/."""
    try:
        top = path.relative_to(_TESTS).parts[0]
    except (ValueError, IndexError):
        return "process"
    return "stack" if top in STACK_FOLDERS else "process"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stack: list[pytest.Item] = []
    rest: list[pytest.Item] = []
    for item in items:
        if tier_of(item.path) == "stack":
            item.add_marker(pytest.mark.stack)
            item.add_marker(pytest.mark.xdist_group(STACK_GROUP))
            stack.append(item)
        else:
            item.add_marker(pytest.mark.xdist_group(_module_group(item.path)))
            rest.append(item)
    items[:] = stack + rest if hasattr(config, "workerinput") else rest + stack


def _module_group(path: Path) -> str:
    try:
        return str(path.relative_to(_TESTS))
    except ValueError:
        return str(path)
