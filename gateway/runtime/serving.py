"""What a serving process of the Serve application (the ``Service`` deployment, each ``Ingress`` replica)
checks before it serves, whoever deployed it (``gateway up``, ``serve run``, ``serve deploy``, KubeRay).

It is given everything and creates nothing: the service's keys' addresses, the API-key secret, the stores
and the node come from configuration (``GATEWAY_*`` variables, a TOML file, Kubernetes Secrets), the edge
secret from the environment of this node's ``ray start``. ``gateway up`` fills them all in; a process
started otherwise that lacks one refuses to start, naming the setting: made up per process, a deposit
wallet nobody watches would be advertised, and an API key made on one replica would fail on the others.
The schema is never migrated here (``gateway migrate`` runs once, before serving): a replica finding a
migration pending refuses, naming it, so that replicas starting together never race to migrate.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.app.settings import Settings
from gateway.auth.key_secret import SECRET_FILE
from gateway.base.keys import DEPOSIT_SETTING, FEE_PAYER_SETTING
from gateway.core.errors import ConfigError
from gateway.runtime.exposure import network_refusals, replica_refusal
from gateway.storage.migrate import MigrationError, pending_url


def missing_settings(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """What this serving process lacks, each naming its setting (empty: nothing)."""
    missing = []
    if not settings.deposit_address:
        missing.append(f"{DEPOSIT_SETTING} is not set (the deposit wallet's public key)")
    if settings.x402_settle and not settings.fee_payer_address:
        missing.append(f"{FEE_PAYER_SETTING} is not set (the fee payer's public key; or GATEWAY_X402_SETTLE=false)")
    # a secret file under the data dir (a mounted Secret) serves as well; a process never makes one
    if not settings.api_key_secret and not (settings.resolved_home / SECRET_FILE).is_file():
        missing.append(
            f"GATEWAY_API_KEY_SECRET (api_key_secret) is not set and {settings.resolved_home / SECRET_FILE} does "
            "not exist: every process must hash API keys with the same secret"
        )
    if not settings.database_url:
        missing.append("GATEWAY_DATABASE_URL (database_url) is not set: only gateway up starts an embedded one")
    if not settings.redis_url:
        missing.append("GATEWAY_REDIS_URL (redis_url) is not set: only gateway up starts an embedded one")
    if settings.embedded_chain:
        missing.append(
            "no node: set GATEWAY_UPSTREAM_RPC_URL (upstream_rpc_url) or GATEWAY_UPSTREAMS (upstreams); only "
            "gateway up starts the embedded devnode"
        )
    missing += network_refusals(settings)  # what gateway up refuses on a routable host (the gRPC stream in clear)
    edge = replica_refusal(settings, dict(environ))
    if edge is not None and edge not in missing:
        missing.append(edge)
    return missing


async def refuse_unless_ready(settings: Settings, environ: Mapping[str, str]) -> None:
    """Raise :class:`ConfigError` (``refused: …``) unless every setting is there and the schema is current."""
    missing = missing_settings(settings, environ)
    if missing:
        raise ConfigError("refused: " + "; ".join(missing))
    assert settings.database_url is not None
    try:
        pending = await pending_url(settings.database_url)
    except MigrationError as exc:
        raise ConfigError(f"refused: {exc}") from exc
    if pending:
        raise ConfigError(
            f"refused: migrations pending ({', '.join(pending)}): run `gateway migrate` once before serving "
            "(a Job or an init container; docs/operations.md, Deploying with serve deploy)"
        )
