"""actors/supervision.py on a real Ray instance: a named actor is found again by a second start, restarted
by Ray after a crash, placed by node affinity, and gone after the stop (in a driver process of its own,
tests/actors/supervision_driver.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_a_singleton_is_found_again_restarted_after_a_crash_and_stopped() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.actors.supervision_driver"], capture_output=True, text=True, timeout=240
    )
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["found_again"] == 12  # the second start's argument (100) was not used: the same actor answered
    assert seen["after_crash"] == 11  # restarted from its constructor's 10
    assert seen["restarted_pid_differs"] is True
    assert seen["placement"] == "NodeAffinitySchedulingStrategy"
    assert seen["after_stop"] == "gone"
