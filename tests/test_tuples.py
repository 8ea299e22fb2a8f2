"""uwf.util.tuples.NamedTuple makes the class typing.NamedTuple makes, for less at import.

Each record is defined twice, once with each base, and the two classes must behave alike:
construction by position and by keyword, defaults, the tuple's own methods, the body's
methods and docstring, pickling, and the errors of a wrong definition.
"""

from __future__ import annotations

import pickle
import typing

import pytest

from uwf.backend.failure import Failure
from uwf.util.tuples import NamedTuple


class Fast(NamedTuple):
    """A record."""

    name: str
    count: int = 0
    note: str | None = None

    def twice(self) -> int:
        return self.count * 2

    @property
    def label(self) -> str:
        return f"{self.name}:{self.count}"


class Slow(typing.NamedTuple):
    """A record."""

    name: str
    count: int = 0
    note: str | None = None

    def twice(self) -> int:
        return self.count * 2

    @property
    def label(self) -> str:
        return f"{self.name}:{self.count}"


@pytest.mark.parametrize("record", [Fast, Slow])
def test_a_record_behaves_as_typing_makes_it(record: type[Fast]) -> None:
    made = record("a", 2)
    assert made == ("a", 2, None) == record(name="a", count=2) == record("a", count=2)
    assert record("b") == ("b", 0, None)
    assert made.twice() == 4 and made.label == "a:2"
    assert made._replace(note="n") == ("a", 2, "n")
    assert made._asdict() == {"name": "a", "count": 2, "note": None}
    assert record._make(["c", 1, "x"]) == ("c", 1, "x")
    assert record._fields == ("name", "count", "note")
    assert record._field_defaults == {"count": 0, "note": None}
    assert record.__match_args__ == ("name", "count", "note")
    assert repr(made) == f"{record.__name__}(name='a', count=2, note=None)"
    assert record.__doc__ == "A record."
    assert record.__module__ == __name__ and record.__qualname__ == record.__name__
    assert isinstance(made, tuple) and made[1] == 2 and made[-1] is None
    assert made < record("b") and hash(made) == hash(("a", 2, None))
    assert list(record.__annotations__) == ["name", "count", "note"]
    assert pickle.loads(pickle.dumps(made)) == made
    name, count, note = made
    assert (name, count, note) == ("a", 2, None)
    with pytest.raises(TypeError):
        record()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        record("a", bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        record("a", name="b")  # type: ignore[misc]
    with pytest.raises(TypeError):
        record("a", 1, None, 4)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        record._make(["a"])
    with pytest.raises(ValueError):
        made._replace(bogus=1)
    with pytest.raises(AttributeError):
        made.count = 3  # type: ignore[misc]


def test_a_record_the_read_path_uses_is_typing_s_class() -> None:
    """Failure (backend/failure.py) is built by uwf.util.tuples: methods, defaults, _replace."""
    failure = Failure("ABCD", "boom", 1, at=5)
    assert failure.attempts == 1 and failure.shown()["since"] == 5
    assert failure.after(None)._replace(error="x").error == "x"
    assert typing.get_type_hints(Failure)["attempts"] is int


def test_a_wrong_record_is_refused_as_typing_refuses_it() -> None:
    with pytest.raises(TypeError, match="Non-default namedtuple field count"):

        class _Order(NamedTuple):
            name: str = ""
            count: int

    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _replace"):

        class _Own(NamedTuple):
            name: str

            def _replace(self) -> None:  # type: ignore[override]
                pass

    with pytest.raises(TypeError, match="no other base"):

        class _Mixed(NamedTuple, int):  # type: ignore[misc]
            name: str

    with pytest.raises(TypeError, match="super"):

        class _Super(NamedTuple):
            name: str

            def __repr__(self) -> str:
                return super().__repr__()
