"""Signals under ``gateway up``: the classifier actor Ray runs follows the chain into the signal log the
replicas read (the session service runs without the launch feed, so the log's cursor is what moves)."""

from __future__ import annotations

import time

import pytest

from tests.integration.service import RunningService, fetch

pytestmark = pytest.mark.integration


def test_the_classifier_actor_moves_the_log_that_signals_recent_reads(service: RunningService) -> None:
    marks: list[int] = []
    deadline = time.monotonic() + 60
    while len(set(marks)) < 3:  # the cursor the actor writes, read back through a replica, moving
        assert time.monotonic() < deadline, f"the signal log did not move: {marks}"
        status, doc, headers = fetch(f"{service.url}/signals/recent?limit=1", None, {})
        assert status == 200 and doc["retention_events"] == 10_000, doc
        assert "x-credits-remaining" not in headers and "x-request-id" in headers  # free; traced like /account/*
        if doc["next_since_slot"] is not None:
            marks.append(doc["next_since_slot"])
        time.sleep(0.2)
    assert marks == sorted(marks)
