"""ops/serve/gateway.yaml is what ``serve build serve_app:app`` writes for its settings, and ops/kuberay/rayservice.yaml
carries the same Serve config, the Ray and Serve settings of cluster.yaml's ``ray start``, and only variables and
Secret keys the gateway reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gateway.app.settings import Settings
from gateway.auth.key_secret import SECRET_FILE
from gateway.base.keys import FEE_PAYER
from gateway.runtime.cluster import SERVE_APP_NAME
from gateway.runtime.serve_runtime import ingress_env
from tests.cluster.test_two_nodes import PER_MACHINE

REPO = Path(__file__).resolve().parents[2]
SERVE_CONFIG = REPO / "ops" / "serve" / "gateway.yaml"
RAYSERVICE = REPO / "ops" / "kuberay" / "rayservice.yaml"
SERVE = Path(sys.executable).with_name("serve")


def serve_config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SERVE_CONFIG.read_text())
    return loaded


def settings_env_names() -> set[str]:
    """Every environment variable the gateway's settings are read from (``GATEWAY_<FIELD>``, and the aliases)."""
    names = set()
    for name, field in Settings.model_fields.items():
        names.add(f"GATEWAY_{name.upper()}")
        choices = getattr(field.validation_alias, "choices", [])
        names.update(str(choice) for choice in choices if str(choice).isupper())
    return names


def test_the_config_file_is_what_serve_build_writes_for_its_settings(tmp_path: Path) -> None:
    config = serve_config()
    (app,) = config["applications"]
    env_vars = app["runtime_env"]["env_vars"]
    assert set(env_vars) <= settings_env_names(), "runtime_env names a variable the gateway does not read"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "RAY_"))}
    out = tmp_path / "built.yaml"
    subprocess.run(
        [str(SERVE), "build", "serve_app:app", "-o", str(out)],
        env={**env, **env_vars},
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (built,) = yaml.safe_load(out.read_text())["applications"]
    assert app["import_path"] == built["import_path"] == "serve_app:app"
    assert app["route_prefix"] == built["route_prefix"] == "/"
    assert app["name"] == SERVE_APP_NAME  # what gateway status and the operator commands look for
    assert app["deployments"] == built["deployments"]
    assert [d["name"] for d in app["deployments"]] == ["Service", "Ingress"]
    # HAProxy listens where the settings say the service does
    assert config["http_options"] == {"host": env_vars["GATEWAY_HOST"], "port": int(env_vars["GATEWAY_PORT"])}
    # Serve's own actors as quiet as gateway up runs them
    assert config["logging_config"]["log_level"] == "WARNING"
    assert config["logging_config"]["enable_access_log"] is False


def rayservice() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RAYSERVICE.read_text())
    return loaded


def pod_specs(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cluster = manifest["spec"]["rayClusterConfig"]
    specs = {"head": cluster["headGroupSpec"]["template"]["spec"]}
    for group in cluster["workerGroupSpecs"]:
        specs[group["groupName"]] = group["template"]["spec"]
    return specs


def test_the_rayservice_carries_the_config_file() -> None:
    manifest = rayservice()
    assert manifest["kind"] == "RayService"
    assert yaml.safe_load(manifest["spec"]["serveConfigV2"]) == serve_config()
    assert manifest["spec"]["rayClusterConfig"]["rayVersion"] == "2.60.0"  # pyproject's pin


def test_every_pod_starts_ray_with_the_serve_settings_of_gateway_up() -> None:
    """As cluster.yaml's ``ray start`` commands do (tests/cluster/test_two_nodes.py checks those)."""
    wanted = ingress_env(Settings(ingress_mode="haproxy"), "/tmp/unused")
    for role, spec in pod_specs(rayservice()).items():
        (container,) = spec["containers"]
        env = {item["name"]: item for item in container["env"]}
        missing = sorted(set(wanted) - PER_MACHINE - set(env))
        assert not missing, f"{role} lacks {missing}"
        assert (
            env["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"]["value"]
            == wanted["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"]
        )
        assert env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"]["value"] == f"{Settings().drain_s:g}"
        assert "secretKeyRef" in env["GATEWAY_EDGE_SECRET"]["valueFrom"]  # the same on every pod, from a Secret


def test_every_variable_and_secret_named_is_one_the_gateway_reads() -> None:
    manifest = rayservice()
    ray_and_serve = set(ingress_env(Settings(ingress_mode="haproxy"), "/tmp/unused"))
    read = settings_env_names() | ray_and_serve
    needed = {"GATEWAY_API_KEY_SECRET", "GATEWAY_EDGE_SECRET", "GATEWAY_DEPOSIT_ADDRESS", "GATEWAY_FEE_PAYER_ADDRESS"}
    for role, spec in pod_specs(manifest).items():
        containers = spec["containers"] + spec.get("initContainers", [])
        for container in containers:
            names = [item["name"] for item in container["env"]]
            assert set(names) <= read, f"{role}/{container['name']}: {sorted(set(names) - read)} are read by nothing"
            secrets = [item for item in container["env"] if "secretKeyRef" in item.get("valueFrom", {})]
            assert all(item["name"].startswith("GATEWAY_") for item in secrets)
        (serving,) = spec["containers"]
        env = {item["name"]: item for item in serving["env"]}
        # what a serving process refuses to start without comes from Secrets
        assert needed <= {name for name, item in env.items() if "valueFrom" in item}, role
        home = Path(env["GATEWAY_HOME"]["value"])
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        for mount in serving["volumeMounts"]:
            assert mount["name"] in volumes and "secret" in volumes[mount["name"]]
            path = Path(mount["mountPath"])
            # a file under the data dir is one the gateway reads there; a directory holds the gRPC TLS files
            if path.is_relative_to(home):
                assert path.relative_to(home) in (Path(FEE_PAYER), Path(SECRET_FILE)), path
            else:
                tls = {env["GATEWAY_GRPC_TLS_CERT"]["value"], env["GATEWAY_GRPC_TLS_KEY"]["value"]}
                assert {str(Path(p).parent) for p in tls} == {str(path)}
    (migrate,) = pod_specs(manifest)["head"]["initContainers"]
    assert migrate["command"] == ["gateway", "migrate"]  # once per head start, before Ray and the app
