"""The client distribution (clients/python, import name ``gateway_client``) as the server's repository holds it:
its copy of the generated gRPC modules is geyser_proto's, its extras are imported only when used, and the old
``gateway.client`` re-exports the very same objects for one release. Its behaviour against a running stack is
tests/integration/test_client_wheel.py (the built wheel, in a clean virtual environment)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPY = REPO / "clients/python/src/gateway_client/_geyser"


@pytest.mark.parametrize(
    "name",
    [
        "geyser_pb2.py",
        "geyser_pb2.pyi",
        "geyser_pb2_grpc.py",
        "geyser_pb2_grpc.pyi",
        "solana_storage_pb2.py",
        "solana_storage_pb2.pyi",
    ],
)
def test_the_clients_generated_modules_are_geyser_protos(name: str) -> None:
    """Regenerating geyser_proto (python -m geyser_proto.generate) means copying them here too; only the
    package in their imports differs (the client may not import the server's package)."""
    server = (REPO / "geyser_proto" / name).read_text()
    assert (COPY / name).read_text() == re.sub(
        r"(?m)^((?:from|import) )geyser_proto\b", r"\1gateway_client._geyser", server
    )


def test_importing_the_client_imports_neither_extra_nor_the_server() -> None:
    probe = (
        "import sys, gateway_client; from gateway_client import GatewayClient, SessionAuth, WalletSigner;"
        "print(sorted(m for m in ('solana', 'solders', 'grpc', 'gateway', 'geyser_proto', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_old_name_reexports_the_same_objects() -> None:
    import gateway.client
    import gateway_client
    import gateway_client.signals
    from gateway.core.signing import signing_message

    # the old submodules' names, as code written for 0.2.9 imports them (they are no files of their own)
    assert importlib.import_module("gateway.client.signals") is gateway_client.signals
    verify_webhook = importlib.import_module("gateway.client.webhooks").verify_webhook
    assert gateway.client.GatewayClient is gateway_client.GatewayClient
    assert gateway.client.__version__ == gateway_client.__version__
    assert verify_webhook is gateway_client.verify_webhook
    assert signing_message is gateway_client.signing.signing_message
    assert set(gateway_client.__all__) <= set(dir(gateway.client))
