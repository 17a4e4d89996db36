"""The gateway's own Serve ingress, serving beside its metered pipeline the same JSON-RPC pipeline with
authentication and metering taken out: the baseline (a) that isolates what metering costs.
Benchmarks only; nothing in the service imports this.

It is the gateway's ``Ingress`` deployment itself (same class, settings, process tuning and
Serve options). ``/`` and ``/rpc`` are the gateway's metered pipeline, untouched; ``POST
/unmetered`` is boundary → parse → forward. One replica process serves both, so comparing them does
not also compare two processes: two replica processes running the same code measured up to 13%
apart in CPU per call under the same load (273 and 308 µs per call for the unmetered pipeline, a
probe of 2026-11-23), and which of two deployments came out ahead changed from one run to the next.
What metering costs is less than that.
"""

from __future__ import annotations

from ray.serve import Deployment

from bench.paired import UNMETERED_PATH, paired_app
from gateway.pipeline.http import RpcFirst
from gateway.runtime.ingress import Ingress

__all__ = ["UNMETERED_PATH", "paired_ingress"]


class _Paired(Ingress.func_or_class):  # type: ignore[misc,name-defined]  # the class Serve wrapped
    """Same app, same transport, same forwarding; one more path, in front, without auth and metering."""

    def __serve_build_asgi_app__(self) -> RpcFirst:
        return paired_app(self.gateway, super().__serve_build_asgi_app__())


def paired_ingress(max_ongoing_requests: int, generation: int) -> Deployment:
    """The deployment, under the gateway's own name (it replaces the gateway's app when run).

    ``generation`` goes into the replica's environment: a new value is a new configuration, for which
    Serve starts a new replica process.
    """
    deployment: Deployment = Ingress.options(  # type: ignore[attr-defined]
        func_or_class=_Paired,
        max_ongoing_requests=max_ongoing_requests,
        ray_actor_options={
            **Ingress.ray_actor_options,  # type: ignore[attr-defined]
            "runtime_env": {"env_vars": {"GATEWAY_BENCH_GENERATION": str(generation)}},
        },
    )
    return deployment
