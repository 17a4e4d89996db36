"""The import contracts of ``pyproject.toml`` (run by ``make check``) hold, and fail on a forbidden import.

Each case plants one import that crosses a layer into a copy of the source tree and runs the same
``lint-imports`` that ``make check`` runs against the copy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *only], cwd=tree, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for package in ("actors", "gateway", "devnode", "pumpfun", "geyser_proto"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    # The client distribution's package, beside them: lint-imports finds the tree's copies first.
    client = REPO / "clients/python/src/gateway_client"
    shutil.copytree(client, tmp_path / "gateway_client", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_as_it_is_keeps_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("gateway/limits/rules.py", "import asyncpg", "core-is-pure"),
        ("gateway/rpc/planning.py", "import gateway.auth.store.accounts", "core-is-pure"),
        ("gateway/credits/stage.py", "import gateway.rpc.forward", "layers"),
        ("gateway/rpc/planning.py", "import gateway.fees.methods", "layers"),  # rpc plans from the registry
        ("gateway/sending/methods.py", "import gateway.node.http", "core-is-pure"),  # declarations are pure
        ("gateway/sending/race.py", "import gateway.trades.rules", "layers"),  # features are independent
        ("gateway/trades/rules.py", "import gateway.node.http", "core-is-pure"),  # a feature's rules are pure
        ("gateway/storage/ledger/sql.py", "import gateway.credits.meter", "layers"),
        ("gateway/auth/endpoints.py", "import redis", "drivers-behind-storage"),
        ("gateway/credits/watcher_actor.py", "import gateway.runtime.serve_runtime", "actors-are-plain"),
        ("gateway/credits/meter.py", "import ray", "ray-in-runtime"),
        ("gateway/webhooks/dispatcher.py", "import actors.webhook_dispatchers", "actors-started-by-the-runtime"),
        ("devnode/node.py", "import actors.supervision", "devnode-imports-nothing"),
        ("actors/send_racers.py", "import gateway.runtime.cluster", "actors-below-the-runtime"),
        ("actors/cluster.py", "import gateway.cli.status", "actors-below-the-runtime"),
        ("gateway/runtime/cluster.py", "import gateway.runtime.inspect", "no-circles"),  # inspect imports cluster
        ("gateway/core/errors.py", "import gateway.core.methods", "no-circles"),  # methods imports errors
        ("gateway/client/__init__.py", "import gateway.storage.errors", "client-standalone"),
        # the client distribution never imports the server (the server imports its signing message)
        ("gateway_client/http.py", "import gateway.core.errors", "client-package-imports-nothing-of-the-server"),
        ("gateway_client/signing.py", "import geyser_proto.filters", "client-package-imports-nothing-of-the-server"),
        ("gateway_client/signals.py", "import redis", "client-package-imports-nothing-of-the-server"),
        ("gateway/node/http.py", "import devnode.node", "devnode-independent"),
        ("devnode/node.py", "import gateway.core.errors", "devnode-imports-nothing"),
        ("pumpfun/curve.py", "import devnode.chain", "pumpfun-pure"),
        ("pumpfun/pda.py", "import aiohttp", "pumpfun-pure"),
        ("gateway/grpc/service.py", "import gateway.pubsub.session", "layers"),
        ("gateway/callers/entry.py", "import gateway.rpc.forward", "layers"),  # the entry is handed its stages
        ("gateway/auth/services.py", "import gateway.callers.entry", "layers"),
        ("gateway/grpc/server.py", "import ray", "ray-in-runtime"),
        ("gateway/node/geyser.py", "import redis", "drivers-behind-storage"),
        ("geyser_proto/filters.py", "import devnode.chain", "geyser-proto-standalone"),
        ("gateway/webhooks/settings.py", "import gateway.storage.connections", "settings-are-declarations"),
        (
            "gateway/base/config.py",
            "import gateway.app.settings",
            "settings-are-declarations",
        ),  # the kernel composes nothing
        ("gateway/base/config.py", "import gateway.signals.rules", "layers"),  # the shared settings know no feature
    ],
)
def test_a_planted_forbidden_import_breaks_a_contract(tree: Path, module: str, planted: str, contract: str) -> None:
    # the tree as copied keeps every contract: test_the_tree_as_it_is_keeps_every_contract (one lint, not one a case)
    with (tree / module).open("a") as f:
        f.write(f"\n{planted}  # planted by the test\n")
    result = lint(tree, contract)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract", "broken"),
    [
        # a new module is bound by its name from its first commit, no list to add it to
        ("gateway/webhooks/planted.py", "import asyncpg", "drivers-behind-storage", True),
        ("gateway/sending/planted.py", "import redis", "drivers-behind-storage", True),
        ("gateway/sending/store.py", "import asyncpg", "drivers-behind-storage", False),  # a feature's store
        ("gateway/pubsub/store/planted.py", "import redis", "drivers-behind-storage", False),
        ("gateway/bulk/methods.py", "import redis", "core-is-pure", True),  # declarations are pure
        ("gateway/pubsub/rules.py", "import gateway.storage.seats", "core-is-pure", True),
        ("gateway/fees/rules.py", "import gateway.rpc.store", "core-is-pure", True),  # a feature's store is storage
        ("gateway/history/planted.py", "import mcp", "mcp-in-its-server", True),
        ("gateway/sending/planted.py", "import ray", "ray-in-runtime", True),
        ("gateway/planted.py", "import actors.supervision", "actors-started-by-the-runtime", True),
        ("gateway/bulk/settings.py", "import gateway.storage.connections", "settings-are-declarations", True),
    ],
)
def test_a_new_module_is_bound_by_its_name(tree: Path, module: str, planted: str, contract: str, broken: bool) -> None:
    path = tree / module
    assert not path.exists(), f"{module} is not new"
    path.parent.mkdir(exist_ok=True)
    if not (path.parent / "__init__.py").exists():
        (path.parent / "__init__.py").write_text('"""Planted by the test."""\n')
    path.write_text(f'"""Planted by the test."""\n\n{planted}\n')
    result = lint(tree, contract)
    assert (result.returncode != 0) == broken, result.stdout + result.stderr
