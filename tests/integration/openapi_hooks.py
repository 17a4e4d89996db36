"""Schemathesis hooks of tests/integration/test_openapi.py, loaded into the ``schemathesis`` CLI's process
(``SCHEMATHESIS_HOOKS``): what its own generation misses (issue 49: it never sent ``DELETE
/webhooks/<5,000 digits>``), and credentials for the routes an API key does not open.

- Path ids, query values and body fields also draw numbers past 64 bits, digit strings of thousands of
  characters, ids with leading zeros and long strings, beside what the document's schemas give.
- Every call carries the run's own account's current API key (``OPENAPI_FUZZ_API_KEY``); a ``POST
  /account/api-key`` that rotates it is followed (``after_call``), so the routes after it keep a key.
- The wallet-signed routes are signed with the account's wallet (``OPENAPI_FUZZ_WALLET``, hex seed), over
  the exact body sent; ``/auth/logout`` gets a session token opened for it.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any

import schemathesis
from hypothesis import strategies as st

from gateway.transports.openapi import openapi_document
from gateway_client import WalletSigner

# This process is the client: it must be able to write the 5,000-digit numbers it sends.
sys.set_int_max_str_digits(0)

SIGNER = WalletSigner(bytes.fromhex(os.environ["OPENAPI_FUZZ_WALLET"]))
BASE_URL = os.environ["OPENAPI_FUZZ_URL"]
API_KEY = [os.environ["OPENAPI_FUZZ_API_KEY"]]
DOCUMENT = openapi_document()
#: Digit strings past Python's 4,300-digit int() limit (each length its own value), and other edges.
LONG_DIGITS = st.builds(lambda zeros, n: "0" * zeros + "9" * n, st.sampled_from([0, 2_000]), st.integers(4_301, 5_000))
EDGES = st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**5_000, str(2**64), "-1", "1e99999"])
HOSTILE = LONG_DIGITS | EDGES | st.just("x" * 70_000)
#: In a URL (path ids, query values): one at a time, under the edge's buffer (HAProxy's 16 KiB request line
#: and headers; past it HAProxy answers its own HTML 400, which no errorfile replaces).
IN_URL = (LONG_DIGITS | EDGES).map(str)
CREDENTIAL_HEADERS = {"x-api-key", "authorization", "x-pubkey", "x-signature", "x-timestamp", "x-nonce"}


def _security(method: str, path: str) -> set[str]:
    operation = DOCUMENT["paths"].get(path, {}).get(method.lower(), {})
    return {name for requirement in operation.get("security", []) for name in requirement}


def _body_fields(method: str, path: str) -> list[str]:
    operation = DOCUMENT["paths"].get(path, {}).get(method.lower(), {})
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    if "$ref" in schema:
        schema = DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return sorted(schema.get("properties", {}))


@schemathesis.hook
def before_generate_path_parameters(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = [parameter.name for parameter in context.operation.path_parameters]
    if not names:
        return strategy
    return strategy | st.sampled_from(names).flatmap(lambda name: IN_URL.map(lambda value: {name: value}))


@schemathesis.hook
def before_generate_query(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = [parameter.name for parameter in context.operation.query]
    if not names:
        return strategy
    return strategy | st.sampled_from(names).flatmap(lambda name: IN_URL.map(lambda value: {name: value}))


@schemathesis.hook
def before_generate_body(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    fields = _body_fields(context.operation.method, context.operation.path)
    if not fields:
        return strategy
    return strategy | st.dictionaries(st.sampled_from(fields), HOSTILE, min_size=1, max_size=len(fields))


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """One kind of credentials per call, the first the route takes: the API key, else a wallet signature,
    else a session token."""
    security = _security(case.method, case.operation.path)
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() not in CREDENTIAL_HEADERS}
    if "apiKeyHeader" in security:
        headers["X-Api-Key"] = API_KEY[0]
    elif "walletSignature" in security:
        body = _body_bytes(case.body)
        kwargs["data"] = body  # the generated body as the exact bytes signed
        headers.update(SIGNER.headers(case.method, case.formatted_path, body))
        headers["Content-Type"] = "application/json"
    elif "bearer" in security:
        headers["Authorization"] = f"Bearer {_session_token()}"
    case.headers = headers
    if isinstance(case.query, dict):  # the apiKeyQuery scheme's generated key would be a second credential
        case.query.pop("api-key", None)


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    if (case.method.upper(), case.operation.path) == ("POST", "/account/api-key") and response.status_code == 200:
        API_KEY[0] = response.json()["api_key"]  # rotated: every call after this one carries the new key


def _body_bytes(body: Any) -> bytes:
    """The bytes the generated body is sent as (schemathesis's negative cases may already be bytes)."""
    if type(body).__name__ == "NotSet":
        return b""
    if isinstance(body, bytes):
        return body
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def _session_token() -> str:
    """A new session of the account (``/auth/challenge``, ``/auth/verify``), for a ``/auth/logout`` to end."""
    challenge = _post("/auth/challenge", {"pubkey": SIGNER.pubkey})["challenge"]
    verify = {"pubkey": SIGNER.pubkey, "challenge": challenge, "signature": SIGNER.sign_challenge(challenge)}
    return str(_post("/auth/verify", verify)["token"])


def _post(path: str, document: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        BASE_URL + path, data=json.dumps(document).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
        return answer
