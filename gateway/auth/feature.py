"""Auth, as the one list (``gateway/app/features.py``) takes it: ``/auth/*`` and the account's own
``/account/*`` routes, their part of the OpenAPI document, and the auth settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.auth.api_doc import API_DOC
from gateway.auth.endpoints import AccountEndpoints
from gateway.auth.routes import account_routes
from gateway.auth.settings import AuthSettings
from gateway.auth.stage import Gates
from gateway.pipeline.declaration import Feature


class AuthHost(Gates, Protocol):
    @property
    def accounts(self) -> AccountEndpoints: ...


def _routes(host: AuthHost) -> Sequence[BaseRoute]:
    return account_routes(host, host.accounts)


FEATURE: Feature[AuthHost] = Feature("auth", routes=_routes, api=(API_DOC,), settings=AuthSettings)
