"""The public documents (``/health``, ``/pricing``, ``/capabilities``) in the OpenAPI document: free, no
credentials (built with :mod:`gateway.core.api_doc`; ``/openapi.json`` itself: :mod:`gateway.transports.openapi`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.core.api_doc import ApiDoc, Open, json_answer, ref


class Health(Open):
    status: Literal["ok", "degraded", "starting"]
    paid_traffic_ready: bool
    agave_healthy: bool
    service_profile: dict[str, Any]
    timestamp: int


class Pricing(Open):
    ok: bool
    credits_per_usdc: int
    classes: dict[str, Any]


class Capabilities(Open):
    ok: bool
    service_profile: dict[str, Any]
    limits: dict[str, Any] = Field(
        description="what a request, a socket and a stream may hold: `jsonrpc`, `rest`, `websocket`, `grpc` "
        "(docs/api.md, Limits)"
    )


def _public(summary: str, schema: str) -> dict[str, Any]:
    ok = json_answer(ref(schema), "the document")
    return {"summary": summary, "tags": ["Public"], "security": [], "responses": {"200": ok}}


def _pricing_operation() -> dict[str, Any]:
    operation = _public("Prices: credits per class, which methods are available", "Pricing")
    limited = json_answer(ref("ErrorBody"), "the per-address limit (ip_limits pricing): RATE_LIMITED, with Retry-After")
    return {**operation, "responses": {**operation["responses"], "429": limited}}


def paths() -> dict[str, Any]:
    return {
        "/health": {
            "get": {
                "summary": "Service health (HTTP 503 while starting)",
                "tags": ["Public"],
                "security": [],
                "responses": {
                    "200": json_answer(ref("Health"), "ok or degraded"),
                    "503": json_answer(ref("Health"), "starting"),
                },
            }
        },
        "/pricing": {"get": _pricing_operation()},
        "/capabilities": {"get": _public("What this deployment offers", "Capabilities")},
    }


API_DOC = ApiDoc(paths, (Health, Pricing, Capabilities))
