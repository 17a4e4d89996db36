"""Every third-party package the code imports is declared in pyproject.toml (requirements.lock is compiled from
it, so an undeclared one would be installed only by chance, through another package): the server's code by the
runtime dependencies (or an extra of its own, as geyser_proto's generator uses grpc-tools), tests, benchmarks and
examples by the runtime set and the extras."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCAL = {"actors", "gateway", "devnode", "pumpfun", "geyser_proto", "serve_app", "tests", "bench", "examples"}
SERVER = ("actors", "gateway", "devnode", "pumpfun", "geyser_proto", "serve_app.py")
AROUND = ("tests", "bench", "examples")


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str], set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    runtime = {_name(r) for r in project["dependencies"]}
    tools = {_name(r) for name, reqs in extras.items() if name != "dev" for r in reqs}
    dev = {_name(r) for r in extras["dev"]}
    return runtime, tools, dev


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


def test_grpc_tools_is_not_in_the_servers_runtime_set() -> None:
    runtime, tools, _ = _declared()
    assert "grpcio-tools" not in runtime and "grpcio-tools" in tools
