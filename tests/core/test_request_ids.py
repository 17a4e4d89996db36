"""Request ids (gateway.pipeline.stages.new_request_id): drawn from the OS many at a time, each still 32 random
hex digits, never repeated, and never shared with a forked child."""

from __future__ import annotations

import os
import string

from gateway.pipeline.stages import new_request_id


def test_ids_are_32_hex_digits_and_unique() -> None:
    ids = [new_request_id() for _ in range(5_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and set(i) <= set(string.hexdigits.lower()) for i in ids)


def test_a_forked_child_draws_its_own() -> None:
    new_request_id()  # the parent holds drawn ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, "".join(new_request_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 4096).decode()
    os.close(read)
    parents = {new_request_id() for _ in range(300)}
    assert len(child) == 8 * 32
    assert not {child[i : i + 32] for i in range(0, len(child), 32)} & parents
