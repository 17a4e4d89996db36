"""The account page, as the one list (``gateway/app/features.py``) takes it: ``/app/``'s routes (pages: not
in the OpenAPI document)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute

from gateway.pipeline.declaration import Feature
from gateway.webui.routes import webui_routes


def _routes(host: object) -> Sequence[BaseRoute]:
    return webui_routes()


FEATURE: Feature[object] = Feature("webui", routes=_routes)
