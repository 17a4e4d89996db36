"""HTTP routes of the access rules, mounted beside the account routes (docs/api.md, "Access rules")."""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.access.endpoints import AccessEndpoints, SpendCapEndpoints
from gateway.auth.stage import Gates
from gateway.pipeline.http import mount

ACCESS_PATH = "/account/access"
SPEND_CAP_PATH = "/account/spend-cap"


def access_routes(gates: Gates, endpoints: AccessEndpoints, spend_cap: SpendCapEndpoints) -> list[BaseRoute]:
    reads = gates.limit("account_read")
    wallet = gates.account_stage("wallet", require_account=True)
    return [
        mount(ACCESS_PATH, "GET", [reads, gates.account_stage()], endpoints.read),
        mount(ACCESS_PATH, "POST", [reads, wallet], endpoints.write),
        mount(SPEND_CAP_PATH, "GET", [reads, gates.account_stage()], spend_cap.read),
        mount(SPEND_CAP_PATH, "POST", [reads, wallet], spend_cap.write),
    ]
