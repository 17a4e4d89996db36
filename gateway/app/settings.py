"""Settings: everything an operator can set, from environment variables (``GATEWAY_*``) and an
optional TOML file, validated at start.

Precedence, highest first: explicit arguments, environment, the TOML file named by ``GATEWAY_CONFIG``
(or ``--config``), defaults. ``RAY_ADDRESS`` is read as is, as Ray users expect.

The root of the settings: each feature declares its own (``gateway/<feature>/settings.py``), the replica
and the gRPC server compose what they serve (``AppSettings``, ``StreamServerSettings``), and this module
adds the deployment's own (how Ray runs the service: the runtime and the CLI read them) and the checks
that span features. Only the runtime and the CLI hold a whole ``Settings``; every other part is typed
by the model of what it reads.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import AliasChoices, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from gateway.app.features import AppSettings
from gateway.base.config import ConfigError
from gateway.core.upstreams import may_hold_key
from gateway.grpc.server import StreamServerSettings

#: Request slots of a replica that open WebSockets can never take (see ``max_ongoing_requests``).
HTTP_HEADROOM = 256
#: The single-node settings that may hold a node's key, as values (``upstreams`` takes references).
_NODE_VALUES = ("upstream_rpc_url", "upstream_ws_url", "upstream_grpc_url", "fallback_rpc_url")

log = logging.getLogger(__name__)


class Settings(BaseSettings, AppSettings, StreamServerSettings):
    """Everything an operator can set. Field descriptions are the reference documentation."""

    # hide_input_in_errors: no setting's value in an error (a node URL's key would reach Serve's logs)
    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", extra="forbid", validate_default=True, hide_input_in_errors=True
    )

    # The deployment: how Ray runs the service.
    ray_address: str | None = Field(
        None,
        validation_alias=AliasChoices("RAY_ADDRESS", "GATEWAY_RAY_ADDRESS", "ray_address"),
        description="Ray cluster to join; empty starts a local Ray.",
    )
    metrics_export_port: int = Field(
        9400,
        ge=1,
        le=65535,
        description="The local Ray's Prometheus metrics port, on 127.0.0.1 (ops/prometheus.yml scrapes 9400; "
        "docs/operations.md).",
    )
    ingress_mode: Literal["proxy", "direct", "haproxy", "reuseport"] = Field(
        "haproxy",
        description="How HTTP reaches replicas: Serve's proxy, one replica on the port itself, Ray's HAProxy, or "
        "every replica of a node on the port itself (SO_REUSEPORT; docs/architecture.md, Ingress modes).",
    )
    ingress_replicas_per_node: int | None = Field(
        None,
        ge=1,
        le=64,
        description="At most this many ingress replicas on one Ray node (Serve's max_replicas_per_node); empty: "
        "no bound. With 1 on a cluster, each node runs at most one, so a lost node takes one replica; replicas "
        "past the nodes' room wait for a node.",
    )
    max_ongoing_requests: int = Field(
        1_280,
        ge=8,
        le=100_000,
        description="Per-replica concurrency cap of Serve: every HTTP request and every open WebSocket holds one "
        "slot. At least ws_max_connections + 256, so that sockets can never take the slots HTTP calls need.",
    )
    edge_secret: str | None = Field(
        None,
        repr=False,
        description="Shared by the bundled HAProxy (gateway-haproxy) and the replicas: only a request carrying it "
        "may name its client's address (X-Gateway-Client). Empty: gateway up makes one for each start. On a "
        "cluster, set the same value in every machine's environment before `ray start` (cluster.yaml).",
    )
    drain_s: float = Field(
        2.0,
        ge=0,
        le=300,
        description="How long a stopping ingress replica keeps serving requests already routed to it.",
    )
    ingress_health_check_period_s: float = Field(
        2.0,
        ge=0.5,
        le=60,
        description="How often Serve asks each ingress replica whether it is alive (Serve's default is 10 s).",
    )
    ingress_health_check_timeout_s: float = Field(
        3.0,
        ge=0.5,
        le=300,
        description="How long Serve waits for that answer (Serve's default is 30 s). Three missed in a row and "
        "Serve kills the replica and starts another: a replica whose event loop is stuck, or a stopped process, "
        "is gone within about period + 3 x timeout + 5 s (docs/architecture.md, Ingress modes).",
    )
    lean_ingress: bool = Field(
        True,
        description="Ingress replicas serve plain HTTP requests through the gateway's lean replacement of Serve's "
        "per-request direct-ingress path (gateway/runtime/lean_ingress.py); false: Serve's own path.",
    )

    @model_validator(mode="after")
    def _check_socket_headroom(self) -> Self:
        if self.max_ongoing_requests < self.ws_max_connections + HTTP_HEADROOM:
            raise ValueError(
                f"max_ongoing_requests ({self.max_ongoing_requests}) must be at least ws_max_connections "
                f"({self.ws_max_connections}) + {HTTP_HEADROOM}: open sockets would take the slots HTTP calls need"
            )
        return self

    @model_validator(mode="after")
    def _check_autoscaling(self) -> Self:
        if self.ingress_autoscaling is None:
            return self
        if self.account_shards == 0:
            raise ValueError(
                "GATEWAY_INGRESS_AUTOSCALING needs account_shards of at least 1 (GATEWAY_ACCOUNT_SHARDS): without "
                "shards each replica enforces ceil(limit / ingress_replicas) of the per-account limits, which a "
                "changing replica count breaks"
            )
        if self.ingress_mode not in ("haproxy", "reuseport"):
            raise ValueError(
                "GATEWAY_INGRESS_AUTOSCALING needs ingress_mode haproxy or reuseport "
                f"(GATEWAY_INGRESS_MODE is {self.ingress_mode}): direct puts one replica on the port, and behind "
                "Serve's proxy a stopping replica's open WebSockets hold its drain until it is killed"
            )
        if self.ingress_replicas != 1:
            raise ValueError(
                "GATEWAY_INGRESS_AUTOSCALING: ingress_replicas is the fixed count, leave it at 1 with "
                "ingress_autoscaling"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if settings_cls.model_config.get("toml_file"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Load and validate settings, turning pydantic's errors into one readable :class:`ConfigError`."""
    if config_file is None and os.environ.get("GATEWAY_CONFIG"):
        config_file = Path(os.environ["GATEWAY_CONFIG"])
    settings_cls: type[Settings] = Settings
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"config file not found: {config_file}")
        config = SettingsConfigDict(**{**Settings.model_config, "toml_file": config_file})
        settings_cls = type("FileSettings", (Settings,), {"model_config": config})
    try:
        settings = settings_cls(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_input=False):  # the messages name settings, never their values
            name = ".".join(str(p) for p in err["loc"])
            lines.append(f"  GATEWAY_{name.upper()} ({name}): {err['msg']}" if name else f"  {err['msg']}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from None
    except SettingsError as exc:  # a value that is not JSON where JSON is wanted (GATEWAY_UPSTREAMS)
        raise ConfigError(f"invalid configuration: {exc}") from None
    for given in secrets_given(settings):
        log.warning(
            "%s given as a value: give a node's key, headers and x-token by reference, {env = NAME} or "
            "{file = PATH} in an entry of upstreams, so that no settings dump or stored change holds them "
            "(docs/configuration.md, A pool of nodes)",
            given,
        )
    return settings


def secrets_given(settings: Settings) -> list[str]:
    """The node secrets the configuration gives as values, each named (never its value): in ``upstreams``,
    each node's (:meth:`gateway.core.upstreams.UpstreamNode.values_given`); else the single-node settings
    holding a URL that may hold a key, and ``upstream_grpc_token``."""
    if settings.upstreams:
        return [
            f"upstreams: node {n.name}: {', '.join(n.values_given())}" for n in settings.upstreams if n.values_given()
        ]
    given = [name for name in _NODE_VALUES if (url := getattr(settings, name)) and may_hold_key(url)]
    return given + (["upstream_grpc_token"] if settings.upstream_grpc_token else [])
