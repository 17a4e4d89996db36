"""Every metric is declared in every process before its backend is installed (actors/metrics.py):
the kernel's (gateway/base/metrics.py) and each feature's (gateway/<feature>/metrics.py, found by that name),
so an actor that imports little of the gateway still exports each one, a counter's series at zero, as a
replica does. The names are docs/operations.md's table, neither more nor fewer."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from actors.metrics import declare_every_metric

REPO = Path(__file__).resolve().parents[2]

_SPECS = """
import json, sys
{imports}
from gateway.base import metrics
print(json.dumps(sorted([m.spec.name, str(m.spec.kind), m.spec.description, list(m.spec.labels),
                         list(m.spec.buckets), [list(z) for z in m.spec.zero]] for m in metrics.REGISTRY.values())))
"""


def _specs_in_a_process_that_imports(*modules: str, declare: bool) -> list[object]:
    imports = "\n".join(f"import {module}" for module in modules)
    if declare:
        imports += "\nfrom actors.metrics import declare_every_metric; declare_every_metric()"
    done = subprocess.run(
        [sys.executable, "-c", _SPECS.format(imports=imports)], capture_output=True, text=True, check=True, cwd=REPO
    )
    specs: list[object] = json.loads(done.stdout)
    return specs


def test_a_process_running_one_actor_declares_what_the_whole_gateway_does() -> None:
    shard = _specs_in_a_process_that_imports("gateway.limits.shard_actor", declare=True)
    everything = _specs_in_a_process_that_imports(
        "gateway.transports.http",
        "gateway.grpc.stream_actor",
        "gateway.credits.watcher_actor",
        "gateway.sending.racer_actor",
        "gateway.sending.reconciler_actor",
        "gateway.signals.classifier_actor",
        "gateway.webhooks.dispatcher_actor",
        "gateway.webhooks.watcher_actor",
        declare=False,
    )
    assert shard == everything
    assert len(shard) == len(declare_every_metric())


def test_the_declared_metrics_are_the_documented_ones() -> None:
    table = (REPO / "docs" / "operations.md").read_text().split("## Metrics\n", 1)[1]
    documented = set(re.findall(r"^\| `(gateway_[a-z0-9_]+)` \|", table, re.MULTILINE))
    assert documented == set(declare_every_metric())


def test_a_features_metrics_module_imports_the_kernels_declarations_only() -> None:
    """Every process imports each of them: they must cost nothing more."""
    modules = sorted(
        path for path in (REPO / "gateway").glob("*/metrics.py") if path.parent.name not in {"runtime", "base"}
    )
    assert len(modules) >= 9
    for path in modules:
        imported = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert imported <= {"__future__", "gateway.base.metrics"}, path
