"""The OpenAPI document against the running stack, with schemathesis: every route, generated and
mutated inputs, and every answer must have a documented status, content type and shape (no 500)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.service import Customer, RunningService, fetch

pytestmark = pytest.mark.integration

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def test_the_document_is_served_free_and_rendered(service: RunningService) -> None:
    status, document, headers = fetch(f"{service.url}/openapi.json", None, {})
    assert status == 200 and document["openapi"].startswith("3.")
    assert "x-credits-remaining" not in headers and "x-request-id" not in headers
    assert {"/", "/rpc", "/account/info", "/account/confirm-deposit", "/health"} <= set(document["paths"])


def test_every_route_answers_in_its_documented_shape(service: RunningService, customer: Customer) -> None:
    done = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{service.url}/openapi.json",
            "--checks",
            CHECKS,
            "--header",
            f"X-Api-Key: {customer.api_key}",
            "--max-examples",
            "30",
            "--seed",
            "20261123",
            "--workers",
            "1",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-12_000:] + done.stderr[-2_000:]
