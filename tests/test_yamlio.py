"""YAML limits are worded by uwf, whatever PyYAML's version or loader says.

PyYAML's wheels differ in their libyaml: 6.0.4's scanner stops nesting past 1,000 levels with
its own message before uwf's event count reaches 64; the pure-Python loader has no limit of its
own. Each depth below is tried with the C loader and the Python one, and with the scanner error
libyaml 0.2.5 raises injected, so the wording holds on any release a resolver picks.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from uwf.util import yamlio
from uwf.util.errors import InvalidInput

DEEP = "nested deeper than 64 levels"

SHAPES = {
    "flow-seq": lambda n: "a: " + "[" * n + "]" * n + "\n",
    "flow-map": lambda n: "{a: " * n + "1" + "}" * n + "\n",
    "block-map": lambda n: "".join(" " * i + "a:\n" for i in range(n)) + " " * n + "b\n",
    "block-seq": lambda n: "".join(" " * i + "-\n" for i in range(n)) + " " * n + "x\n",
}


@pytest.fixture(params=["CSafeLoader", "SafeLoader"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if not hasattr(yaml, request.param):
        pytest.fail(f"PyYAML has no {request.param}: uwf's wheels always carry libyaml")
    monkeypatch.setattr(yamlio, "_loader", lambda: getattr(yaml, request.param))
    return str(request.param)


@pytest.mark.parametrize("depth", [65, 1_100])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_deep_documents_are_refused_in_uwf_words(loader: str, shape: str, depth: int) -> None:
    with pytest.raises(InvalidInput) as caught:
        yamlio.load(SHAPES[shape](depth))
    assert str(caught.value) == f"invalid YAML: {DEEP}"


def test_an_abyss_is_refused_by_the_c_loader_without_a_crash(loader: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        yamlio.load(SHAPES["flow-seq"](300_000))
    assert str(caught.value) == f"invalid YAML: {DEEP}"


def test_64_levels_still_load(loader: str) -> None:
    value: Any = yamlio.load(SHAPES["flow-seq"](63))
    for _ in range(63):
        value = value["a"] if isinstance(value, dict) else value[0]
    assert value == []


def test_libyaml_nesting_message_is_reworded(monkeypatch: pytest.MonkeyPatch) -> None:
    """libyaml 0.2.5's own refusal, raised by the scanner before any event, as 6.0.4 does."""

    def scanner_stops(*args: Any, **kwargs: Any) -> Any:
        raise yaml.scanner.ScannerError(
            "while increasing flow level", None, "exceeded maximum nesting depth", None
        )

    monkeypatch.setattr(yaml, "parse", scanner_stops)
    with pytest.raises(InvalidInput) as caught:
        yamlio.load("a: [[[]]]\n", path="/tmp/x.yaml")
    assert str(caught.value) == f"invalid YAML: {DEEP}"


def test_other_scanner_errors_keep_their_words() -> None:
    with pytest.raises(InvalidInput) as caught:
        yamlio.load("a: [1, 2\n", path="/tmp/x.yaml")
    assert str(caught.value).startswith("invalid YAML: while parsing a flow sequence")
    assert '"/tmp/x.yaml"' in str(caught.value)
