"""verify_webhook as a receiver uses it: the gateway's signature scheme (docs/api.md, Deliveries)."""

from __future__ import annotations

import time

from gateway_client.webhooks import verify_webhook, webhook_signature


def test_a_delivery_verifies_and_any_change_does_not() -> None:
    body, now = b'{"type":"api_key.rotated"}', int(time.time())
    headers = {
        "x-webhook-event-id": "evt_1",
        "X-Webhook-Timestamp": str(now),
        "X-Webhook-Signature": webhook_signature("whsec_a", "evt_1", now, body),
    }
    assert verify_webhook("whsec_a", headers, body)
    assert verify_webhook(["whsec_old", "whsec_a"], headers, body)  # during a rotation
    assert not verify_webhook("whsec_b", headers, body)
    assert not verify_webhook("whsec_a", headers, body + b" ")
    assert not verify_webhook("whsec_a", {**headers, "x-webhook-event-id": "evt_2"}, body)
    assert not verify_webhook("whsec_a", headers, body, now=now + 301)  # an old attempt replayed
