"""The package's stack: small edge caps (test_edge.py) with the access log on and the edge's log in a file
(test_no_credential_logged.py), and service_env's 50 slots of blocks (test_purged_block.py). No module's settings
change what the others' tests see: no test of the edge sends a credential the log search could miss, the log
search opens one socket at a time, and a refund is the same under any edge cap."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from tests.integration.service import RunningService, service_env, start_service, stop_service
from tests.support import TEST_IP_LIMITS

ENV = {
    # test_edge.py: 4 sockets per account, 8 per address, 12 per replica; the ``webhooks`` address group
    # allows a burst of 5; a body has 2 s to arrive
    "GATEWAY_IP_LIMITS": orjson.dumps({**TEST_IP_LIMITS, "webhooks": {"rps": 0.01, "burst": 5}}).decode(),
    "GATEWAY_WS_MAX_CONNECTIONS_PER_ACCOUNT": "4",
    "GATEWAY_WS_MAX_CONNECTIONS_PER_ADDRESS": "8",
    "GATEWAY_WS_MAX_CONNECTIONS": "12",
    "GATEWAY_MAX_ONGOING_REQUESTS": str(12 + 256),
    "GATEWAY_REQUEST_BODY_TIMEOUT_S": "2",
    # test_no_credential_logged.py: the access log on, and the edge's log lines to HAProxy's stderr, which
    # Ray keeps in a file beside its configuration, rather than to syslog on 127.0.0.1:514
    "GATEWAY_ACCESS_LOG": "true",
    "RAY_SERVE_HAPROXY_LOG_TARGET": "stderr",
}


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    home = tmp_path_factory.mktemp("edge")
    running = start_service(home, service_env(home, **ENV))
    yield running
    if running.process.poll() is None:
        stop_service(running)
