"""Sending, as the one list (``gateway/app/features.py``) takes it: the send and bundle methods, their
handlers (the bundle relay's only with a block engine configured, as its ``/relay/*`` routes), and the
sending settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.core.methods import MethodClass
from gateway.credits.meter import Meter
from gateway.pipeline.declaration import Feature, Host, LocalMethod
from gateway.pipeline.stages import Handler, Stage
from gateway.sending.api_doc import API_DOC
from gateway.sending.block_engine import BlockEngine
from gateway.sending.methods import SPECS
from gateway.sending.racers import Racers
from gateway.sending.relay import BundleRelay
from gateway.sending.routes import relay_routes
from gateway.sending.send_and_confirm import SendAndConfirm
from gateway.sending.send_status import SendStatusMethod
from gateway.sending.settings import SendingSettings
from gateway.sending.smart_send import SmartSend


class SendingHost(Host, Protocol):
    """What the send handlers and the relay's routes read from the replica."""

    @property
    def settings(self) -> SendingSettings: ...

    @property
    def meter(self) -> Meter: ...

    @property
    def racers(self) -> Racers: ...

    @property
    def engine(self) -> BlockEngine | None: ...

    @property
    def forwarder(self) -> Handler: ...

    def relay_stages(self, method: str, from_body: bool) -> list[Stage]: ...


def _handlers(host: SendingHost) -> Mapping[str, LocalMethod]:
    base_fee = host.prices.price(MethodClass.SEND) or 0
    local: dict[str, LocalMethod] = {
        "sendSmartTransaction": SmartSend(host.upstream),
        "sendAndConfirm": SendAndConfirm(host.upstream, host.racers, host.db, host.meter, base_fee, host.top_up),
        "getSendStatus": SendStatusMethod(host.upstream, host.db, host.settings.send_unproven_release_s),
    }
    if host.engine is not None:
        local.update(BundleRelay(host.engine).handlers)
    return local


def _routes(host: SendingHost) -> Sequence[BaseRoute]:
    return relay_routes(host.relay_stages, host.forwarder) if host.engine is not None else ()


FEATURE: Feature[SendingHost] = Feature(
    "sending", methods=SPECS, handlers=_handlers, routes=_routes, api=(API_DOC,), settings=SendingSettings
)
