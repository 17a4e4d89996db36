"""``serve run serve_app:app``: the gateway's Serve application, with settings from the environment.

The deployment itself is :mod:`gateway.runtime.ingress`; ``gateway up`` deploys the same.
"""

from __future__ import annotations

from gateway.runtime.ingress import build_app
from gateway.settings import load_settings

app = build_app(load_settings())
