"""One probe of one node: a single JSON-RPC batch asking its health, its slot and block height at each
commitment, its max-shred-insert slot, its genesis hash and its version (:class:`gateway.core.node_health.Probe`).

One batch, so that a probe costs the node one request however much it asks; the pool's owner sends one
per node every few hundred milliseconds (:mod:`gateway.node.health`).

A probe's timeout and latency count the node's time only: the time this process's event loop was held up
meanwhile (busy serving, or the process starved of CPU on a saturated machine:
:class:`gateway.node.loop_lag.LoopLag`) is taken out, so an answer the gateway reads late is not the node's
failure (issue 83: the gateway's own slowness never takes a node out of service).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from gateway.core.node_health import COMMITMENTS, Probe
from gateway.node.http import Upstream, UpstreamTimeout, UpstreamUnavailable
from gateway.node.loop_lag import LoopLag


def _calls() -> bytes:
    calls: list[tuple[str, list[Any]]] = [("getHealth", [])]
    calls += [("getSlot", [{"commitment": c}]) for c in COMMITMENTS]
    calls += [("getBlockHeight", [{"commitment": c}]) for c in COMMITMENTS]
    calls += [("getMaxShredInsertSlot", []), ("getGenesisHash", []), ("getVersion", [])]
    return orjson.dumps([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(calls)])


_BATCH = _calls()
_SLOTS = (1, 2, 3)
_HEIGHTS = (4, 5, 6)
_SHRED, _GENESIS, _VERSION = 7, 8, 9
#: How much longer than its timeout a probe may wait, in all, for the time the loop was held up; past it the
#: probe fails however busy the process was (one held up this long serves nothing anyway).
MAX_HELD_S = 30.0


async def probe(node: Upstream, timeout_s: float, lag: LoopLag | None = None) -> Probe:
    """What ``node`` answers now; a :class:`Probe` with ``failure`` set when it does not answer within
    ``timeout_s`` of its own time (``lag``: the time the loop was held up is not the node's, up to
    :data:`MAX_HELD_S` more; without one, every second counts)."""
    if lag is None:
        return await _probe(node, timeout_s, None)
    with lag.watching():
        return await _probe(node, timeout_s, lag)


async def _probe(node: Upstream, timeout_s: float, lag: LoopLag | None) -> Probe:
    at = time.time()
    started = time.monotonic()
    held_before = lag.held() if lag is not None else 0.0

    def own() -> float:  # the node's time since the probe was sent
        spent = time.monotonic() - started
        return spent if lag is None else max(0.0, spent - (lag.held() - held_before))

    ceiling = timeout_s if lag is None else timeout_s + MAX_HELD_S
    request = asyncio.ensure_future(node.post(_BATCH, ceiling, replayable=True))
    try:
        while not request.done():
            left = timeout_s - own()
            if left <= 0:
                return Probe(at, own(), failure=f"no answer within {timeout_s:g} s")
            await asyncio.wait({request}, timeout=left)
        answers = orjson.loads(request.result())
    except UpstreamTimeout:
        return Probe(at, own(), failure=f"no answer within {timeout_s:g} s")
    except UpstreamUnavailable as exc:
        return Probe(at, own(), failure=str(exc))
    except orjson.JSONDecodeError:
        return Probe(at, own(), failure="its answer is not JSON")
    finally:
        if not request.done():
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
    latency = own()
    if not isinstance(answers, list):
        return Probe(at, latency, failure="it answered the probe's batch with one object")
    by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
    version = _result(by_id, _VERSION)
    return Probe(
        at,
        latency,
        health=_health(by_id.get(0)),
        slots=_triple(by_id, _SLOTS),
        heights=_triple(by_id, _HEIGHTS),
        max_shred_slot=_int(by_id, _SHRED),
        genesis=_str(by_id, _GENESIS),
        version=version.get("solana-core") if isinstance(version, dict) else None,
    )


def _result(by_id: dict[Any, Any], i: int) -> Any:
    answer = by_id.get(i)
    return answer.get("result") if isinstance(answer, dict) else None


def _int(by_id: dict[Any, Any], i: int) -> int | None:
    value = _result(by_id, i)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(by_id: dict[Any, Any], i: int) -> str | None:
    value = _result(by_id, i)
    return value if isinstance(value, str) else None


def _triple(by_id: dict[Any, Any], ids: tuple[int, int, int]) -> tuple[int, int, int] | None:
    values = [_int(by_id, i) for i in ids]
    if any(v is None for v in values):
        return None
    a, b, c = values
    assert a is not None and b is not None and c is not None
    return a, b, c


def _health(answer: Any) -> str | None:
    """None for ``"ok"``; else what the node said (Agave: -32005 'Node is behind by N slots', 'unhealthy')."""
    if not isinstance(answer, dict):
        return "no answer to getHealth"
    if answer.get("result") == "ok":
        return None
    error = answer.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code"))
    return f"getHealth answered {str(answer.get('result'))[:40]!r}"
