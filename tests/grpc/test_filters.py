"""The shared filter code and fan-out (geyser_proto.filters, geyser_proto.fanout), pure: Yellowstone's
filter semantics, commitment holds, data slices, per-stream names on one encoded body, the union request."""

from __future__ import annotations

import base64
import os

import pytest

from geyser_proto import geyser_pb2 as pb
from geyser_proto import solana_storage_pb2 as storage
from geyser_proto.fanout import Fanout, encode_names
from geyser_proto.filters import (
    CONFIRMED,
    FINALIZED,
    PROCESSED,
    AccountFilter,
    FilterError,
    SlotFilter,
    TransactionFilter,
    TxView,
    Unsupported,
    b58decode,
    b58encode,
    compile_request,
    is_token_account,
)

KEYS = [os.urandom(32) for _ in range(6)]
A, B, C, OWNER, PROGRAM, OTHER = KEYS


class Sink:
    def __init__(self) -> None:
        self.got: list[pb.SubscribeUpdate] = []

    def deliver(self, data: bytes) -> None:
        self.got.append(pb.SubscribeUpdate.FromString(data))

    def kinds(self) -> list[str]:
        return [str(u.WhichOneof("update_oneof")) for u in self.got]


def tx_update(slot: int, keys: list[bytes], *, failed: bool = False, vote: bool = False) -> pb.SubscribeUpdate:
    info = pb.SubscribeUpdateTransactionInfo(signature=os.urandom(64), is_vote=vote, index=3)
    info.transaction.message.account_keys.extend(keys)
    if failed:
        info.meta.err.err = b"\x01\x00\x00\x00"
    update = pb.SubscribeUpdate(transaction=pb.SubscribeUpdateTransaction(slot=slot, transaction=info))
    update.filters.append("upstream-name")
    return update


def account_update(slot: int, key: bytes, owner: bytes, data: bytes = b"", lamports: int = 1) -> pb.SubscribeUpdate:
    info = pb.SubscribeUpdateAccountInfo(pubkey=key, owner=owner, data=data, lamports=lamports)
    return pb.SubscribeUpdate(account=pb.SubscribeUpdateAccount(slot=slot, account=info))


def slot_update(slot: int, status: int) -> pb.SubscribeUpdate:
    return pb.SubscribeUpdate(slot=pb.SubscribeUpdateSlot(slot=slot, status=status))  # type: ignore[arg-type]


def request(**fields: object) -> pb.SubscribeRequest:
    return pb.SubscribeRequest(**fields)  # type: ignore[arg-type]


def test_base58_round_trips_and_matches_known_values() -> None:
    assert b58encode(bytes(32)) == "1" * 32
    assert b58decode("11111111111111111111111111111111") == bytes(32)
    system = "Vote111111111111111111111111111111111111111"
    assert b58encode(b58decode(system)) == system
    for raw in (b"", b"\0\0x", os.urandom(32), os.urandom(64)):
        assert b58decode(b58encode(raw)) == raw


def test_compile_keeps_names_commitment_and_slices() -> None:
    filters = compile_request(
        request(
            accounts={"a": pb.SubscribeRequestFilterAccounts(account=[b58encode(A)], owner=[b58encode(OWNER)])},
            slots={"s": pb.SubscribeRequestFilterSlots(filter_by_commitment=True)},
            transactions={"t": pb.SubscribeRequestFilterTransactions(vote=False, account_include=[b58encode(B)])},
            blocks_meta={"m": pb.SubscribeRequestFilterBlocksMeta()},
            commitment=pb.FINALIZED,
            accounts_data_slice=[pb.SubscribeRequestAccountsDataSlice(offset=0, length=4)],
        )
    )
    assert filters.accounts == (("a", AccountFilter(accounts=frozenset([A]), owners=frozenset([OWNER]))),)
    assert filters.slots == (("s", SlotFilter(filter_by_commitment=True)),)
    assert filters.transactions == (("t", TransactionFilter(vote=False, include=frozenset([B]))),)
    assert (filters.blocks_meta, filters.commitment, filters.data_slices) == (("m",), FINALIZED, ((0, 4),))
    assert compile_request(request()).empty


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"accounts": {"a": pb.SubscribeRequestFilterAccounts(account=["nope"])}}, "invalid account 'nope'"),
        ({"transactions": {"t": pb.SubscribeRequestFilterTransactions(signature="xyz")}}, "invalid signature"),
        ({"commitment": 7}, "CommitmentLevel from 7"),
        (
            {
                "accounts_data_slice": [
                    pb.SubscribeRequestAccountsDataSlice(offset=8),
                    pb.SubscribeRequestAccountsDataSlice(offset=0),
                ]
            },
            "out of order",
        ),
        (
            {
                "accounts_data_slice": [
                    pb.SubscribeRequestAccountsDataSlice(offset=0, length=9),
                    pb.SubscribeRequestAccountsDataSlice(offset=8),
                ]
            },
            "overlapped",
        ),
        ({"slots": {"": pb.SubscribeRequestFilterSlots()}}, "filter name"),
        ({"slots": {f"s{i}": pb.SubscribeRequestFilterSlots() for i in range(65)}}, "too many `slots` filters"),
    ],
)
def test_invalid_requests_say_why(fields: dict[str, object], error: str) -> None:
    with pytest.raises(FilterError, match=error.replace("(", r"\(")) as raised:
        compile_request(request(**fields))
    assert not isinstance(raised.value, Unsupported)


def test_account_data_filters_are_checked_at_compile_time() -> None:
    def account_filter(*entries: pb.SubscribeRequestFilterAccountsFilter) -> pb.SubscribeRequest:
        return request(accounts={"a": pb.SubscribeRequestFilterAccounts(filters=list(entries))})

    Filter, Memcmp = pb.SubscribeRequestFilterAccountsFilter, pb.SubscribeRequestFilterAccountsFilterMemcmp
    with pytest.raises(FilterError, match="datasize used more than once"):
        compile_request(account_filter(Filter(datasize=1), Filter(datasize=2)))
    with pytest.raises(FilterError, match="only allowed to be true"):
        compile_request(account_filter(Filter(token_account_state=False)))
    with pytest.raises(FilterError, match="too many account data filters"):
        compile_request(account_filter(*[Filter(datasize=1)] * 5))
    with pytest.raises(FilterError, match="memcmp data too large"):
        compile_request(account_filter(Filter(memcmp=Memcmp(offset=0, bytes=bytes(129)))))
    with pytest.raises(FilterError, match="invalid base64"):
        compile_request(account_filter(Filter(memcmp=Memcmp(offset=0, base64="@@"))))
    same = [Memcmp(offset=2, bytes=b"ab"), Memcmp(offset=2, base58=b58encode(b"ab")), Memcmp(offset=2, base64="YWI=")]
    compiled = {compile_request(account_filter(Filter(memcmp=m))).accounts[0][1] for m in same}
    assert compiled == {AccountFilter(memcmp=((2, b"ab"),))}


@pytest.mark.parametrize(
    ("fields", "what"),
    [
        ({"blocks": {"b": pb.SubscribeRequestFilterBlocks()}}, "`blocks` filters"),
        ({"entry": {"e": pb.SubscribeRequestFilterEntry()}}, "`entry` filters"),
        ({"block_footer": {"f": pb.SubscribeRequestFilterBlockFooter()}}, "`block_footer` filters"),
        ({"from_slot": 5}, "`from_slot` replay"),
        ({"transactions": {"t": pb.SubscribeRequestFilterTransactions(token_accounts=pb.ALL)}}, "`token_accounts`"),
        ({"accounts": {"a": pb.SubscribeRequestFilterAccounts(cuckoo_accounts_filter=pb.CuckooFilter())}}, "cuckoo"),
    ],
)
def test_what_this_server_does_not_offer_is_unsupported(fields: dict[str, object], what: str) -> None:
    with pytest.raises(Unsupported, match=what):
        compile_request(request(**fields))


def test_account_filter_semantics() -> None:
    token = bytearray(165)
    token[108] = 1  # initialized
    info = pb.SubscribeUpdateAccountInfo(pubkey=A, owner=OWNER, data=bytes(token), lamports=50)
    assert AccountFilter().matches(info)
    assert AccountFilter(accounts=frozenset([A, B]), owners=frozenset([OWNER])).matches(info)
    assert not AccountFilter(accounts=frozenset([A]), owners=frozenset([PROGRAM])).matches(info)  # AND
    assert AccountFilter(datasize=165, token_account_state=True).matches(info)
    assert not AccountFilter(datasize=82).matches(info)
    assert AccountFilter(memcmp=((108, b"\x01\x00"),)).matches(info)
    assert not AccountFilter(memcmp=((164, b"\x00\x00"),)).matches(info)  # past the end
    assert AccountFilter(lamports=(("gt", 49), ("lt", 51), ("ne", 7))).matches(info)
    assert not AccountFilter(lamports=(("eq", 49),)).matches(info)
    assert not AccountFilter(nonempty_txn_signature=True).matches(info)
    assert AccountFilter(nonempty_txn_signature=False).matches(info)
    assert is_token_account(bytes(token)) and not is_token_account(bytes(165)) and not is_token_account(bytes(355))
    token_2022 = bytes(token) + b"\x02" + bytes(10)
    assert is_token_account(token_2022) and not is_token_account(bytes(token) + b"\x01" + bytes(10))


def test_transaction_filter_semantics() -> None:
    update = tx_update(1, [A, B, C])
    view = TxView.of(update.transaction.transaction)
    assert TransactionFilter().matches(view)
    assert TransactionFilter(include=frozenset([OTHER, B])).matches(view)  # any of
    assert not TransactionFilter(include=frozenset([OTHER])).matches(view)
    assert not TransactionFilter(exclude=frozenset([C])).matches(view)  # none of
    assert TransactionFilter(required=frozenset([A, C])).matches(view)  # all of
    assert not TransactionFilter(required=frozenset([A, OTHER])).matches(view)
    assert TransactionFilter(vote=False, failed=False).matches(view)
    assert not TransactionFilter(failed=True).matches(view)
    assert TransactionFilter(failed=True).matches(TxView.of(tx_update(1, [A], failed=True).transaction.transaction))
    assert TransactionFilter(vote=True).matches(TxView.of(tx_update(1, [A], vote=True).transaction.transaction))
    assert TransactionFilter(signature=view.signature).matches(view)
    info = update.transaction.transaction
    info.meta.loaded_readonly_addresses.append(OTHER)  # keys loaded from lookup tables count too
    assert TransactionFilter(include=frozenset([OTHER])).matches(TxView.of(info))


def test_slot_filter_semantics() -> None:
    plain, by_commitment, interslot = SlotFilter(), SlotFilter(filter_by_commitment=True), SlotFilter(False, True)
    assert plain.matches(PROCESSED, FINALIZED) and plain.matches(FINALIZED, PROCESSED)
    assert not plain.matches(4, PROCESSED) and interslot.matches(4, PROCESSED)
    assert by_commitment.matches(CONFIRMED, CONFIRMED) and not by_commitment.matches(PROCESSED, CONFIRMED)


def test_each_stream_gets_its_names_on_one_body_and_transaction_statuses_are_derived() -> None:
    fanout = Fanout()
    one, two = Sink(), Sink()
    fanout.attach(one, compile_request(request(transactions={"t1": pb.SubscribeRequestFilterTransactions()})))
    fanout.attach(
        two,
        compile_request(
            request(
                transactions={"x": pb.SubscribeRequestFilterTransactions(account_include=[b58encode(A)])},
                transactions_status={"st": pb.SubscribeRequestFilterTransactions()},
            )
        ),
    )
    update = tx_update(9, [A, B])
    signature = update.transaction.transaction.signature
    fanout.publish(update)
    assert [list(u.filters) for u in one.got] == [["t1"]]
    assert one.got[0].transaction.transaction.signature == signature
    assert two.kinds() == ["transaction", "transaction_status"]
    assert [list(u.filters) for u in two.got] == [["x"], ["st"]]
    status = two.got[1].transaction_status
    assert (status.slot, status.signature, status.index) == (9, signature, 3)
    assert fanout.evaluated == 2  # t1 and st are one (empty) filter value; x the other
    fanout.publish(tx_update(10, [C]))  # x is not even looked at: C is not its key
    assert fanout.evaluated == 2 + 1 and len(one.got) == 2 and len(two.got) == 3
    assert encode_names(["ab", "c"]) == b"\n\x02ab\n\x01c"


def test_identical_filters_are_evaluated_once_and_asked_upstream_once() -> None:
    fanout = Fanout()
    sinks = [Sink() for _ in range(5)]
    wanted = request(accounts={"mine": pb.SubscribeRequestFilterAccounts(owner=[b58encode(OWNER)])})
    for sink in sinks:
        fanout.attach(sink, compile_request(wanted))
    fanout.publish(account_update(1, A, OWNER))
    fanout.publish(account_update(1, B, PROGRAM))
    assert fanout.evaluated == 1 and all(len(sink.got) == 1 for sink in sinks)
    union = fanout.wanted()
    assert list(union.accounts) == ["accounts-0"] and list(union.accounts["accounts-0"].owner) == [b58encode(OWNER)]
    assert union.commitment == pb.PROCESSED and union.slots["slots"].interslot_updates
    assert not union.transactions and not union.blocks_meta


def test_commitment_holds_updates_until_their_slot_gets_there() -> None:
    fanout = Fanout()
    processed, confirmed, finalized = Sink(), Sink(), Sink()
    for sink, level in ((processed, pb.PROCESSED), (confirmed, pb.CONFIRMED), (finalized, pb.FINALIZED)):
        fanout.attach(
            sink,
            compile_request(
                request(
                    transactions={"t": pb.SubscribeRequestFilterTransactions()},
                    slots={"s": pb.SubscribeRequestFilterSlots(filter_by_commitment=True)},
                    commitment=level,
                )
            ),
        )
    fanout.publish(tx_update(5, [A]))
    assert (processed.kinds(), confirmed.kinds(), finalized.kinds()) == (["transaction"], [], [])
    fanout.publish(slot_update(5, CONFIRMED))
    assert confirmed.kinds() == ["transaction", "slot"] and finalized.kinds() == []
    fanout.publish(slot_update(5, FINALIZED))
    assert finalized.kinds() == ["transaction", "slot"]
    assert processed.kinds() == ["transaction"]  # filter_by_commitment: only processed statuses for it
    fanout.publish(tx_update(6, [A]))
    fanout.publish(slot_update(6, 6))  # dead: what it held is dropped
    fanout.publish(slot_update(6, FINALIZED))
    assert finalized.kinds() == ["transaction", "slot", "slot"]


def test_a_new_request_drops_what_the_old_filters_held() -> None:
    fanout = Fanout()
    sink = Sink()
    held = compile_request(
        request(transactions={"old": pb.SubscribeRequestFilterTransactions()}, commitment=pb.CONFIRMED)
    )
    member = fanout.attach(sink, held)
    fanout.publish(tx_update(3, [A]))
    fanout.replace(member, compile_request(request(transactions={"new": pb.SubscribeRequestFilterTransactions()})))
    fanout.publish(slot_update(3, CONFIRMED))
    assert sink.got == []
    fanout.publish(tx_update(4, [A]))
    assert [list(u.filters) for u in sink.got] == [["new"]]
    fanout.detach(member)
    fanout.publish(tx_update(5, [A]))
    assert len(sink.got) == 1 and not fanout.members


def test_data_slices_per_stream() -> None:
    fanout = Fanout()
    whole, sliced = Sink(), Sink()
    accounts = {"a": pb.SubscribeRequestFilterAccounts(account=[b58encode(A)])}
    fanout.attach(whole, compile_request(request(accounts=accounts)))
    slices = [
        pb.SubscribeRequestAccountsDataSlice(offset=1, length=2),
        pb.SubscribeRequestAccountsDataSlice(offset=5, length=10),
    ]
    fanout.attach(sliced, compile_request(request(accounts=accounts, accounts_data_slice=slices)))
    fanout.publish(account_update(1, A, OWNER, data=b"0123456789"))
    assert whole.got[0].account.account.data == b"0123456789"
    assert sliced.got[0].account.account.data == b"12" + b"56789"


def test_block_meta_goes_to_streams_that_ask() -> None:
    fanout = Fanout()
    meta, none = Sink(), Sink()
    fanout.attach(meta, compile_request(request(blocks_meta={"m": pb.SubscribeRequestFilterBlocksMeta()})))
    fanout.attach(none, compile_request(request(slots={"s": pb.SubscribeRequestFilterSlots()})))
    fanout.publish(pb.SubscribeUpdate(block_meta=pb.SubscribeUpdateBlockMeta(slot=4, blockhash="h")))
    assert [list(u.filters) for u in meta.got] == [["m"]] and none.got == []
    assert fanout.wanted().blocks_meta
    base64.b64encode(storage.Transaction().SerializeToString())  # the storage types load beside geyser's
