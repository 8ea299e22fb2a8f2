"""Identifiers: 13-character Crockford hashes and ULID thread ids (docs/format.md, "Nodes" and
"Thread state")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uwf.util.base32 import ALPHABET, check_hash, encode64, is_hash
from uwf.util.errors import InvalidInput
from uwf.util.ulid import check_thread_id, is_thread_id, new_thread_id, timestamp_ms

U64 = st.integers(min_value=0, max_value=2**64 - 1)


def decode64(text: str) -> int:
    """13 Crockford digits back into an integer (the inverse of ``encode64``)."""
    if not is_hash(text):
        raise ValueError(f"not a hash: {text!r}")
    value = 0
    for ch in text:
        value = (value << 5) | ALPHABET.index(ch)
    return value


# -- Crockford hashes ---------------------------------------------------------------------


@given(U64)
def test_encode_decode_round_trip(value: int) -> None:
    text = encode64(value)
    assert len(text) == 13
    assert is_hash(text)
    assert decode64(text) == value


@given(U64)
def test_first_digit_carries_only_four_bits(value: int) -> None:
    first = encode64(value)[0]
    assert first in "0123456789ABCDEF"
    assert ALPHABET.index(first) == value >> 60


@given(U64, U64)
def test_encoding_preserves_order(a: int, b: int) -> None:
    # Most significant digit first and an alphabet in ascending order: string order = value order.
    assert (encode64(a) < encode64(b)) == (a < b)


def test_encode_known_values() -> None:
    assert encode64(0) == "0000000000000"
    assert encode64(2**64 - 1) == "FZZZZZZZZZZZZ"
    assert encode64(31) == "000000000000Z"
    assert encode64(32) == "0000000000010"


@pytest.mark.parametrize("value", [-1, 2**64])
def test_encode_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode64(value)


def test_alphabet_is_crockford() -> None:
    assert len(ALPHABET) == 32 == len(set(ALPHABET))
    assert not set("ILOU") & set(ALPHABET)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abcdefghjkmnp",  # lower case
        "0123456789abc",
        "0123456789AB",  # 12 characters
        "0123456789ABCD",  # 14 characters
        "0123456789ABI",
        "0123456789ABL",
        "0123456789ABO",
        "0123456789ABU",
        "0123456789AB/",
        "../0123456789",
        "01234567..ABC",
        "0123456789AB ",
        " 0123456789AB",
        "0123456789AB\n",
        "0123456789ABC\n",  # 13 digits and a newline (a regex's $ would let it by)
        "G000000000000",  # first digit above F: more than 64 bits
        "Z000000000000",
    ],
)
def test_is_hash_rejects(text: str) -> None:
    assert not is_hash(text)
    with pytest.raises(ValueError):
        decode64(text)


@pytest.mark.parametrize("value", [None, 123, b"0123456789ABC", ["0123456789ABC"], 1.5])
def test_is_hash_rejects_non_strings(value: Any) -> None:
    assert not is_hash(value)


@pytest.mark.parametrize("text", ["0000000000000", "FZZZZZZZZZZZZ", "6KWJ7TFJ2GJTG"])
def test_is_hash_accepts(text: str) -> None:
    assert is_hash(text)
    assert check_hash(text) == text


def test_check_hash_message() -> None:
    with pytest.raises(InvalidInput) as info:
        check_hash("abc")
    assert str(info.value) == (
        'invalid hash: "abc" (expected 13 upper-case Crockford Base32 characters)'
    )


def test_check_hash_names_what_it_checks() -> None:
    with pytest.raises(InvalidInput) as info:
        check_hash("", "type hash")
    assert str(info.value) == (
        "invalid type hash: '' (expected 13 upper-case Crockford Base32 characters)"
    )


def test_check_hash_escapes_and_shortens_the_value() -> None:
    with pytest.raises(InvalidInput) as info:
        check_hash("a\nb")
    assert str(info.value).startswith("invalid hash: 'a\\nb' (")
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInput) as info:
        check_hash("X" * 500)
    assert len(str(info.value)) < 200


# -- ULID thread ids ----------------------------------------------------------------------


def test_new_thread_id_is_a_ulid() -> None:
    tid = new_thread_id()
    assert is_thread_id(tid)
    assert len(tid) == 26
    assert check_thread_id(tid) == tid


def test_new_thread_ids_differ() -> None:
    assert len({new_thread_id() for _ in range(100)}) == 100


@pytest.mark.parametrize(
    "now_ms",
    [
        0,
        1,
        int(datetime(2026, 5, 25, 12, 0, 0, 123000, tzinfo=UTC).timestamp() * 1000),
        int(datetime(2000, 1, 1, tzinfo=UTC).timestamp() * 1000),
        int(datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp() * 1000),
        2**48 - 1,
    ],
)
def test_timestamp_round_trip(now_ms: int) -> None:
    tid = new_thread_id(now_ms=now_ms)
    assert is_thread_id(tid)
    assert timestamp_ms(tid) == now_ms


@given(st.integers(min_value=0, max_value=2**48 - 1))
def test_timestamp_round_trip_property(now_ms: int) -> None:
    assert timestamp_ms(new_thread_id(now_ms=now_ms)) == now_ms


def test_timestamp_of_a_fresh_id_is_now() -> None:
    from uwf.util.ulid import now_ms

    before = now_ms()
    ts = timestamp_ms(new_thread_id())
    after = now_ms()
    assert ts is not None
    assert before - 1 <= ts <= after + 1


def test_ids_sort_by_time() -> None:
    assert new_thread_id(now_ms=1000) < new_thread_id(now_ms=2000)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "01ARZ3NDEKTSV4RRFFQ69G5FA",  # 25 characters
        "01ARZ3NDEKTSV4RRFFQ69G5FAVV",  # 27 characters
        "01arz3ndektsv4rrffq69g5fav",  # lower case
        "01ARZ3NDEKTSV4RRFFQ69G5FAI",
        "01ARZ3NDEKTSV4RRFFQ69G5FAL",
        "01ARZ3NDEKTSV4RRFFQ69G5FAO",
        "01ARZ3NDEKTSV4RRFFQ69G5FAU",
        "01ARZ3NDEKTSV4RRFFQ69G5F/V",
        "81ARZ3NDEKTSV4RRFFQ69G5FAV",  # time above 2^48 - 1
        "0123456789ABC",  # a CAS hash, not a thread id
        "01ARZ3NDEKTSV4RRFFQ69G5FAV\n",
    ],
)
def test_invalid_thread_ids(text: str) -> None:
    assert not is_thread_id(text)
    assert timestamp_ms(text) is None
    with pytest.raises(InvalidInput):
        check_thread_id(text)


@pytest.mark.parametrize("value", [None, 42, b"01ARZ3NDEKTSV4RRFFQ69G5FAV"])
def test_non_string_thread_ids(value: Any) -> None:
    assert not is_thread_id(value)


def test_timestamp_agrees_with_python_ulid() -> None:
    from ulid import ULID

    for text in ["01ARZ3NDEKTSV4RRFFQ69G5FAV", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", new_thread_id()]:
        assert is_thread_id(text)
        assert timestamp_ms(text) == ULID.from_str(text).milliseconds


def test_check_thread_id_message() -> None:
    with pytest.raises(InvalidInput) as info:
        check_thread_id("nope")
    assert str(info.value) == 'invalid thread id: "nope" (expected a 26-character ULID)'
