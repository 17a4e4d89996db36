"""The design card's ``actors/``: every Ray actor of the service is made in it, one module per owner of
state, and nowhere else (``ray.remote`` is applied only there; the import contract
``actors-started-by-the-runtime`` keeps the rest of the gateway from starting them)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from actors.service import service_actor_names

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("gateway", "devnode", "pumpfun", "geyser_proto", "serve_app.py")


def _remote_uses(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "remote"
        and isinstance(node.value, ast.Name)
        and node.value.id == "ray"
    ]


def test_ray_remote_is_applied_in_actors_and_nowhere_else() -> None:
    elsewhere = {
        str(path.relative_to(REPO)): lines
        for source in SOURCES
        for path in ([REPO / source] if source.endswith(".py") else (REPO / source).rglob("*.py"))
        if (lines := _remote_uses(path))
    }
    assert elsewhere == {}
    assert _remote_uses(REPO / "actors" / "supervision.py"), "the one place it is applied"


def test_every_actor_gateway_up_starts_has_its_module() -> None:
    names = service_actor_names({"grpc_servers": 1, "webhook_dispatchers": 1, "send_racers": 1, "account_shards": 1})
    modules = {
        "grpc-stream-0": "grpc_streams",
        "webhook-dispatcher-0": "webhook_dispatchers",
        "webhook-watcher": "webhook_watcher",
        "signal-classifier": "signal_classifier",
        "send-reconciler": "send_reconciler",
        "send-racer-0": "send_racers",
        "account-shard-0": "account_shards",
        "deposit-watcher": "deposit_watcher",
        "upstream-health": "upstream_health",
    }
    assert names == list(modules)
    for module in modules.values():
        loaded = importlib.import_module(f"actors.{module}")
        assert any(callable(getattr(loaded, name)) for name in dir(loaded) if name.startswith("start_")), module
        assert f"``{module}``" in (importlib.import_module("actors").__doc__ or ""), f"actors/__init__ lists {module}"
