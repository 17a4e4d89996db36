"""The whole service as a Ray Serve application, with settings from the environment: ``serve run serve_app:app``,
``serve deploy ops/serve/gateway.yaml``, KubeRay's RayService (ops/kuberay/rayservice.yaml).

It is :func:`gateway.runtime.ingress.build_app`, which ``gateway up`` deploys too: the ``Service`` deployment
starting every actor and the ``Ingress`` replicas (docs/operations.md, Deploying with serve deploy or KubeRay).
"""

from __future__ import annotations

from gateway.app.settings import load_settings
from gateway.runtime.ingress import build_app

app = build_app(load_settings())
