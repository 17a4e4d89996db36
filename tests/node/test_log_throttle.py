"""Warnings that repeat with every call are logged once per ``every_s`` with how many were left out
(gateway/base/log_throttle.py): through the real node client while its node is down, and by the clock."""

from __future__ import annotations

import logging

import pytest

from gateway.base.log_throttle import LogThrottle
from gateway.node import http
from gateway.node.http import HttpUpstream, UpstreamUnavailable
from gateway.runtime.ports import free_port


async def test_a_node_down_is_one_warning_not_one_a_call(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "throttled", LogThrottle(http.log))  # nothing logged by earlier tests counts
    upstream = HttpUpstream(f"http://127.0.0.1:{free_port()}/", name="dead")  # nothing listens there
    with caplog.at_level(logging.WARNING, logger=http.log.name):
        for _ in range(200):
            with pytest.raises(UpstreamUnavailable):
                await upstream.post(b"{}", 5.0)
    failed = [r for r in caplog.records if r.getMessage().startswith("node dead: request failed")]
    assert len(failed) == 1, [r.getMessage() for r in failed]
    await upstream.close()


def test_the_next_warning_after_the_pause_counts_those_left_out(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    throttle = LogThrottle(logging.getLogger("throttled-test"), every_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="throttled-test"):
        for n in range(1000):
            throttle.warning("failed", "call %d failed", n)
        throttle.warning("other", "another kind")  # each kind on its own
        now[0] += 9.9
        throttle.warning("failed", "call %d failed", 1000)
        now[0] += 0.2
        throttle.warning("failed", "call %d failed", 1001)
        throttle.warning("failed", "call %d failed", 1002)
    assert [r.getMessage() for r in caplog.records] == [
        "call 0 failed",
        "another kind",
        "call 1001 failed (and 1000 more like it in the last 10 s, not logged)",
    ]
