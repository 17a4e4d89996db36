"""The bulk lookups, as the one list (``gateway/app/features.py``) takes them: ``/bulk/*`` and their part of
the OpenAPI document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.bulk.api_doc import API_DOC
from gateway.bulk.routes import bulk_routes
from gateway.pipeline.declaration import Feature
from gateway.pipeline.stages import Handler, Stage


class BulkHost(Protocol):
    @property
    def bulk(self) -> Mapping[str, Handler]: ...

    def bulk_stages(self) -> list[Stage]: ...


def _routes(host: BulkHost) -> Sequence[BaseRoute]:
    return bulk_routes(host.bulk, host.bulk_stages())


FEATURE: Feature[BulkHost] = Feature("bulk", routes=_routes, api=(API_DOC,))
