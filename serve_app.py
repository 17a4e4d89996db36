"""``serve run serve_app:app``: the gateway's Serve application, with settings from the environment.

The deployment itself is :mod:`gateway.runtime.ingress`; ``gateway up`` deploys the same.
"""

from __future__ import annotations

from gateway.config import load_settings
from gateway.runtime.ingress import build_app

app = build_app(load_settings())
