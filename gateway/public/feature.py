"""The public documents, as the one list (``gateway/app/features.py``) takes them: ``/health``,
``/pricing`` and ``/capabilities`` and their part of the OpenAPI document."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute

from gateway.pipeline.declaration import Feature
from gateway.public.api_doc import API_DOC
from gateway.public.routes import PublicHost, public_routes


def _routes(host: PublicHost) -> Sequence[BaseRoute]:
    return public_routes(host)


FEATURE: Feature[PublicHost] = Feature("public", routes=_routes, api=(API_DOC,))
