"""The creation fields of ``POST /webhooks``, checked: every refusal is a 400 INVALID_REQUEST whose
message names the field (and the value, when one is at fault). Pure.

The request model (:class:`gateway.webhooks.models.WebhookRequest`) takes any JSON of the right types and
refuses fields it does not know; the values are checked here, so each rule has its own message:

- ``url``: ``https://`` with a host, at most 2,048 characters. A host given as an IP address
  (``127.1`` and the other forms a resolver reads as one included) must be public
  (:func:`gateway.webhooks.rules.forbidden_address`), and ``localhost`` names are refused. A name is
  not resolved here: each delivery checks the addresses it resolves to. With the development
  setting ``webhook_allow_private`` (on by default with the embedded devnode:
  :func:`gateway.webhooks.targets.allow_private`), ``http://`` and any host are accepted; a refusal
  names the setting (:data:`LOCAL_RECEIVERS`).
- ``filter_type``: one of :data:`gateway.webhooks.rules.FILTER_TYPES`.
- ``filter_value``: a base58 32-byte key for ``account`` and ``program`` (required); for
  ``my_account`` the caller's own key or absent (stored as the caller's key either way); refused
  with ``lifecycle`` and ``signal``.
- ``lifecycle_events``: ``lifecycle`` only, at least one, each a known event; duplicates dropped.
- ``signal_events``: ``signal`` only, each a known signal kind; absent or empty means every kind,
  stored as the list of every kind known at creation.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ValidationError

from gateway.core.errors import invalid_request
from gateway.signals.rules import KINDS, is_pubkey
from gateway.webhooks.events import LIFECYCLE_EVENTS
from gateway.webhooks.models import MAX_WEBHOOK_URL_LENGTH, EmptyRequest, WebhookRequest
from gateway.webhooks.rules import FILTER_TYPES, forbidden_address
from gateway.webhooks.store.subscriptions import NewWebhook

WATCHES_AN_ADDRESS = ("account", "program")
_FIELDS = ", ".join(WebhookRequest.model_fields)
_MISSING = {
    "url": "url is required: the https:// URL deliveries are posted to",
    "filter_type": f"filter_type is required: one of {', '.join(FILTER_TYPES)}",
}
_SHOWN = 64  # characters of a refused value quoted in a message
#: How a refusal of a local receiver says what would accept it.
LOCAL_RECEIVERS = "set GATEWAY_WEBHOOK_ALLOW_PRIVATE=true on a development gateway"


def parse_creation(body: bytes, caller: str, allow_private: bool) -> NewWebhook:
    """The subscription ``body`` asks for, or raise 400 naming what is wrong."""
    document = json_object(body)
    try:
        request = WebhookRequest.model_validate(document)
    except ValidationError as exc:
        raise invalid_request(_shape_refusal(exc, WebhookRequest)) from exc
    problem = url_problem(request.url, allow_private)
    if problem is not None:
        raise invalid_request(problem)
    kind = request.filter_type
    if kind not in FILTER_TYPES:
        raise invalid_request(f"filter_type must be one of {', '.join(FILTER_TYPES)}, not {_quoted(kind)}")
    return NewWebhook(
        url=request.url,
        filter_type=kind,
        filter_value=_filter_value(kind, request.filter_value, caller),
        lifecycle_events=_lifecycle_events(kind, request.lifecycle_events),
        signal_events=_signal_events(kind, request.signal_events),
    )


def parse_empty(body: bytes) -> None:
    """The body of the per-id POSTs: ``{}`` or nothing."""
    if not body.strip():
        return
    try:
        EmptyRequest.model_validate(json_object(body))
    except ValidationError as exc:
        raise invalid_request(_shape_refusal(exc, EmptyRequest)) from exc


def json_object(body: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid_request("body must be a JSON object (valid UTF-8 JSON)") from exc
    if not isinstance(document, dict):
        raise invalid_request("body must be a JSON object")
    return document


def url_problem(url: str, allow_private: bool) -> str | None:
    """Why deliveries may not be posted to ``url``, or None."""
    if len(url) > MAX_WEBHOOK_URL_LENGTH:
        return f"url must be at most {MAX_WEBHOOK_URL_LENGTH} characters"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "url must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is not a number from 0 to 65535
    except ValueError:
        return f"url is not a valid URL: {_quoted(url)}"
    scheme = parts.scheme.lower()
    if scheme != "https" and not (allow_private and scheme == "http"):
        if scheme == "http":
            return f"url must start with https://: http:// is for development gateways only ({LOCAL_RECEIVERS})"
        return "url must start with https://"
    host = parts.hostname
    if not host:
        return "url must name a host: https://host/path"
    if allow_private:
        return None
    why = host_problem(host)
    if why is None:
        return None
    public = "deliveries go to public addresses only"
    return f"url's host {_quoted(host)} is {why}: {public} (local receivers: {LOCAL_RECEIVERS})"


def host_problem(host: str) -> str | None:
    """Why ``host`` (as a URL names it) is not a public address, as far as can be told without DNS."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "a loopback name"
    address = _ip_literal(name)
    return None if address is None else forbidden_address(address)


def _ip_literal(name: str) -> str | None:
    """The IP address ``name`` stands for when it is one: IPv6, dotted IPv4, and the short, octal,
    hex and integer forms a resolver reads as IPv4 (``127.1``, ``0x7f.1``, ``2130706433``)."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if not name or not all(c.isdigit() or c in ".xabcdef" for c in name):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(name))
    except OSError:
        return None


def _filter_value(kind: str, value: str | None, caller: str) -> str | None:
    if kind in WATCHES_AN_ADDRESS:
        if value is None:
            raise invalid_request(f"filter_value is required for filter_type {kind}: the base58 address watched")
        if not is_pubkey(value):
            raise invalid_request(f"filter_value must be a base58 public key (32 bytes), not {_quoted(value)}")
        return value
    if kind == "my_account":
        if value is not None and value != caller:
            raise invalid_request("filter_value of a my_account webhook must be your own public key, or left out")
        return caller
    if value is not None:
        raise invalid_request(f"filter_value is not used with filter_type {kind}: leave it out")
    return None


def _lifecycle_events(kind: str, events: Sequence[str] | None) -> tuple[str, ...]:
    if kind != "lifecycle":
        if events:
            raise invalid_request(f"lifecycle_events is only used with filter_type lifecycle, not {kind}")
        return ()
    if not events:
        raise invalid_request(
            f"lifecycle_events is required for filter_type lifecycle: one or more of {', '.join(LIFECYCLE_EVENTS)}"
        )
    unknown = next((e for e in events if e not in LIFECYCLE_EVENTS), None)
    if unknown is not None:
        raise invalid_request(
            f"unknown lifecycle event {_quoted(unknown)}; the events are {', '.join(LIFECYCLE_EVENTS)}"
        )
    return tuple(dict.fromkeys(events))


def _signal_events(kind: str, kinds: Sequence[str] | None) -> tuple[str, ...]:
    if kind != "signal":
        if kinds:
            raise invalid_request(f"signal_events is only used with filter_type signal, not {kind}")
        return ()
    unknown = next((k for k in kinds or () if k not in KINDS), None)
    if unknown is not None:
        raise invalid_request(
            f"unknown signal kind {_quoted(unknown)} in signal_events; the kinds are {', '.join(KINDS)}"
        )
    return tuple(dict.fromkeys(kinds)) if kinds else KINDS


def _shape_refusal(exc: ValidationError, model: type[BaseModel]) -> str:
    """The first error pydantic found, as a message naming the field."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else "body"
    if error["type"] == "extra_forbidden":
        if model is EmptyRequest:
            return f"unknown field {_quoted(field)}: this route takes {{}} or no body"
        return f"unknown field {_quoted(field)}; the fields are {_FIELDS}"
    if error["type"] == "missing" or (error.get("input") is None and field in _MISSING):
        return _MISSING.get(field, f"{field} is required")
    if field in ("lifecycle_events", "signal_events"):
        return f"{field} must be an array of strings"
    return f"{field} must be a string"


def _quoted(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")
