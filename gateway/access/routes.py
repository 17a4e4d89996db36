"""HTTP routes of the access rules, mounted beside the account routes (docs/api.md, "Access rules")."""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.access.endpoints import AccessEndpoints
from gateway.auth.stage import Gates
from gateway.pipeline_http import mount

ACCESS_PATH = "/account/access"


def access_routes(gates: Gates, endpoints: AccessEndpoints) -> list[BaseRoute]:
    reads = gates.limit("account_read")
    return [
        mount(ACCESS_PATH, "GET", [reads, gates.account_stage()], endpoints.read),
        mount(ACCESS_PATH, "POST", [reads, gates.account_stage("wallet", require_account=True)], endpoints.write),
    ]
