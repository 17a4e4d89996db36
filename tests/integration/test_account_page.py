"""The account page (docs/dashboard.md) from the whole stack as ``gateway up`` runs it: the Serve replicas,
behind the edge, serve the built page at /app/ with its Content-Security-Policy (tests/app drives it in
Chromium against a gateway in the test process)."""

from __future__ import annotations

import urllib.request

import pytest

from tests.integration.service import RunningService

pytestmark = pytest.mark.integration


def test_the_replicas_serve_the_built_page_with_its_policy(service: RunningService) -> None:
    for path in ("/app/", "/app/app.js"):
        with urllib.request.urlopen(service.url + path, timeout=30) as resp:
            assert resp.status == 200, path
            assert resp.headers["Content-Security-Policy"].startswith("default-src 'self'; script-src 'self';")
            body = resp.read()
        assert body, path
    with urllib.request.urlopen(service.url + "/app/", timeout=30) as resp:
        assert b'<script type="module" src="app.js"></script>' in resp.read()
