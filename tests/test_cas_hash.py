"""The node hash: crockford13(xxh64(ascii(type) ++ dcbor(payload))) (docs/format.md, "Nodes").

The test vectors of docs/format.md, "Nodes", pin the exact bytes, so that stores written by
any uwf agree; the property tests pin what makes the hash content-derived: key order and
``1.0`` vs ``1`` do not matter, NaN/Infinity are refused, and canonicalisation is a fixed
point.
"""

from __future__ import annotations

import math
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uwf.cas.codec import dcbor, hash_bytes, node_hash, self_typed_hash
from uwf.util.base32 import is_hash
from uwf.util.errors import InvalidInput
from uwf.util.jsonfmt import canonical

ZERO = "0000000000000"
TYPE = "ABCDEFGHJKMNP"

# -- the test vectors of docs/format.md, "Nodes" ---------------------------------------------------


def test_vector_xxh64_of_empty_input() -> None:
    assert hash_bytes(b"") == "EYHPV6X8XHTCS"


@pytest.mark.parametrize(
    ("type_hash", "payload", "expected"),
    [
        (ZERO, {"b": [1, 2.5, "x"], "a": None}, "6KWJ7TFJ2GJTG"),
        (ZERO, {"a": None, "b": [1.0, 2.5, "x"]}, "6KWJ7TFJ2GJTG"),
        (TYPE, "hello", "DQZHQEMM09QY8"),
        (TYPE, {"z": {"é": [True, False, -3, 1e300, 0.1]}}, "9VN756D6RYX12"),
        (TYPE, {"bb": 1, "a": 2, "c": {"y": "", "x": []}}, "FNB87M4XEB87F"),
    ],
)
def test_vector_node_hash(type_hash: str, payload: Any, expected: str) -> None:
    assert node_hash(type_hash, payload) == expected


def test_vector_self_typed() -> None:
    assert self_typed_hash({"type": "object"}) == "51CHTPEAPZ2KP"


def test_self_typed_hash_leaves_out_the_type_prefix() -> None:
    payload = {"type": "object"}
    assert self_typed_hash(payload) == hash_bytes(dcbor(payload))
    assert self_typed_hash(payload) != node_hash("51CHTPEAPZ2KP", payload)


# -- dcbor: RFC 8949 deterministic encoding ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [  # RFC 8949 appendix A, with integral floats encoded as integers (docs/format.md, "Nodes")
        (0, "00"),
        (23, "17"),
        (24, "1818"),
        (1000000, "1a000f4240"),
        (2**64 - 1, "1bffffffffffffffff"),
        (-1, "20"),
        (-1000, "3903e7"),
        (1.0, "01"),
        (-0.0, "00"),
        (100000.0, "1a000186a0"),
        (1.5, "f93e00"),
        (2.5, "f94100"),
        (5.960464477539063e-8, "f90001"),
        (3.4028234663852886e38, "fa7f7fffff"),
        (1.0e300, "fb7e37e43c8800759c"),
        (-4.1, "fbc010666666666666"),
        (0.1, "fb3fb999999999999a"),
        (2.0**60, "fa5d800000"),  # integral but beyond 2^53: stays a float
        (float(2**53), "1b0020000000000000"),  # integral and within 2^53: an integer
        (False, "f4"),
        (True, "f5"),
        (None, "f6"),
        ("", "60"),
        ("a", "6161"),
        ("\u00fc", "62c3bc"),
        ([], "80"),
        ([1, [2, 3]], "8201820203"),
        ({}, "a0"),
    ],
)
def test_dcbor_encoding(value: Any, encoded: str) -> None:
    assert dcbor(value).hex() == encoded


def test_dcbor_sorts_keys_shorter_first_then_bytewise() -> None:
    assert dcbor({"bb": 1, "a": 2, "c": 3}).hex() == "a3" + "616102" + "616303" + "62626201"


def test_strings_are_not_normalised() -> None:
    assert node_hash(TYPE, "\u00e9") != node_hash(TYPE, "e\u0301")


# -- properties -----------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=16,
)
TYPES = st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=13, max_size=13)


def _reorder(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse insertion order."""
    if isinstance(value, dict):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


def _floats_for_ints(value: Any) -> Any:
    """The same JSON value with every integer within ±2^53 written as a float."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) <= 2**53:
        return float(value)
    if isinstance(value, dict):
        return {k: _floats_for_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats_for_ints(v) for v in value]
    return value


@given(TYPES, JSON)
def test_hash_is_deterministic_and_well_formed(type_hash: str, payload: Any) -> None:
    h = node_hash(type_hash, payload)
    assert is_hash(h)
    assert node_hash(type_hash, payload) == h
    assert self_typed_hash(payload) == self_typed_hash(payload)


@given(TYPES, JSON)
def test_hash_ignores_key_order(type_hash: str, payload: Any) -> None:
    assert node_hash(type_hash, _reorder(payload)) == node_hash(type_hash, payload)


@given(st.data(), st.dictionaries(st.text(max_size=6), JSON, min_size=1, max_size=6))
def test_hash_ignores_any_key_permutation(data: st.DataObject, payload: dict[str, Any]) -> None:
    items = data.draw(st.permutations(list(payload.items())))
    assert node_hash(TYPE, dict(items)) == node_hash(TYPE, payload)


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_integral_float_hashes_like_the_integer(value: int) -> None:
    assert node_hash(TYPE, float(value)) == node_hash(TYPE, value)
    assert dcbor(float(value)) == dcbor(value)


@given(TYPES, JSON)
def test_integral_floats_anywhere_hash_like_integers(type_hash: str, payload: Any) -> None:
    assert node_hash(type_hash, _floats_for_ints(payload)) == node_hash(type_hash, payload)


@given(JSON)
def test_canonical_is_idempotent(payload: Any) -> None:
    once = canonical(payload)
    assert canonical(once) == once
    assert dcbor(once) == dcbor(payload)


@given(JSON)
def test_canonical_leaves_no_integral_float_within_2_53(payload: Any) -> None:
    def check(value: Any) -> None:
        if isinstance(value, float):
            assert not (value.is_integer() and abs(value) <= 2**53)
        elif isinstance(value, dict):
            for item in value.values():
                check(item)
        elif isinstance(value, list):
            for item in value:
                check(item)

    check(canonical(payload))


@given(st.dictionaries(st.text(max_size=30), st.integers(), min_size=2, max_size=12))
def test_dcbor_map_keys_shorter_first(payload: dict[str, int]) -> None:
    decoded = cbor2.loads(dcbor(payload))
    keys = list(decoded)
    assert keys == sorted(payload, key=lambda k: (len(k.encode()), k.encode()))
    assert decoded == payload


@given(JSON, st.sampled_from([math.nan, math.inf, -math.inf]), st.integers(0, 2))
def test_nan_and_infinity_are_rejected(payload: Any, bad: float, where: int) -> None:
    poisoned = [bad, {"x": [payload, bad]}, {"a": payload, "b": {"c": bad}}][where]
    with pytest.raises(InvalidInput) as info:
        node_hash(TYPE, poisoned)
    assert str(info.value) == "NaN and Infinity are not valid JSON values"
    with pytest.raises(InvalidInput):
        self_typed_hash(poisoned)


def test_canonical_examples() -> None:
    assert canonical({"a": 1.0, "b": [2.0, 2.5], "c": (3.0,)}) == {"a": 1, "b": [2, 2.5], "c": [3]}
    assert type(canonical(1.0)) is int
    assert type(canonical(2.0**60)) is float
    assert canonical(True) is True


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1: "a"}, "object keys must be strings, got int"),
        ({"a": {1.5}}, "not a JSON value: set"),
        (b"bytes", "not a JSON value: bytes"),
    ],
)
def test_canonical_rejects_non_json(value: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        node_hash(TYPE, value)
    assert str(info.value) == message


def test_the_written_out_schema_hashes_are_the_schemas_hashes() -> None:
    """uwf's type hashes are constants (no hashing at start-up); they must be what the
    schemas hash to. A failure here means a schema changed: that is a new protocol type, and
    every stored node of the old one keeps the old hash. Update HASHES only on purpose."""
    from uwf.protocol import schemas

    assert schemas.hashes() == schemas.computed_hashes()
