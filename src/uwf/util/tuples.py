"""``NamedTuple`` as ``typing`` spells it, built for less at import (docs/performance.md,
"Processes and start-up (issue 36)").

``class Failure(NamedTuple): …`` with ``typing.NamedTuple`` checks every field's annotation
as a type (under postponed annotations each is a string, which the check compiles into a
``ForwardRef``), then ``collections.namedtuple`` compiles a ``__new__`` for the class: a
record cost ~1.4 M instructions to define, and ``thread show`` defines some twenty. This
``NamedTuple`` makes a class that behaves the same — a tuple with a getter per field, the
same ``__new__`` (by position or keyword, with the defaults), ``_make``, ``_replace``,
``_asdict``, ``_fields``, ``_field_defaults``, ``__match_args__``, ``repr`` and pickling,
the body's methods and docstring, its (string) ``__annotations__`` — for ~0.15 M: nothing
is compiled (those methods are written once, in ``_Tuple``, the base of every record) and
the annotations are not checked (mypy checks them; type checkers see ``typing.NamedTuple``
itself).

Like ``typing.NamedTuple``: a field without a default after one with a default is a
``TypeError``, and a method cannot replace an attribute the tuple class defines. Not
supported (``TypeError``): a generic record, another base, ``super()`` in a method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

__all__ = ["NamedTuple"]

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    from collections import _tuplegetter  # the C field getter namedtuple uses

    # what the class body holds that is not a field or a method of the record
    _BODY = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__"})
    # what every record has from _Tuple, that a body must not replace
    _OWN = frozenset(
        {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults"}
        | {"_make", "_replace", "_asdict", "_source", "__match_args__", "_tail"}
    )

    class _Tuple(tuple):
        """What collections.namedtuple defines in each class it makes (``__new__``,
        ``_make``, ``_replace``, ``_asdict``, ``__repr__``, ``__getnewargs__``), written once
        here: defining them per record compiled a ``__new__`` each time."""

        __slots__ = ()
        _fields: ClassVar[tuple[str, ...]] = ()
        _field_defaults: ClassVar[dict[str, Any]] = {}
        _tail: ClassVar[tuple[Any, ...]] = ()  # the defaults' values, in order

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            if kwargs or len(args) != len(cls._fields):
                args = cls._bind(args, kwargs)
            return tuple.__new__(cls, args)

        @classmethod
        def _bind(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
            fields, tail = cls._fields, cls._tail
            missing = len(fields) - len(args)
            if not kwargs and 0 < missing <= len(tail):  # defaults only: the quick way
                return args + tail[len(tail) - missing :]
            if missing < 0:
                raise TypeError(
                    f"{cls.__name__}() takes {len(fields)} positional arguments but "
                    f"{len(args)} were given"
                )
            values = list(args)
            for field in fields[len(args) :]:
                if field in kwargs:
                    values.append(kwargs.pop(field))
                elif field in cls._field_defaults:
                    values.append(cls._field_defaults[field])
                else:
                    raise TypeError(f"{cls.__name__}() missing required argument: {field!r}")
            if kwargs:
                name = next(iter(kwargs))
                if name in fields:
                    raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
            return tuple(values)

        @classmethod
        def _make(cls, iterable: Any) -> Any:
            made = tuple.__new__(cls, iterable)
            if len(made) != len(cls._fields):
                raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
            return made

        def _replace(self, /, **changes: Any) -> Any:
            made = self._make(map(changes.pop, self._fields, self))
            if changes:
                raise ValueError(f"Got unexpected field names: {list(changes)!r}")
            return made

        def _asdict(self) -> dict[str, Any]:
            return dict(zip(self._fields, self, strict=True))

        def __repr__(self) -> str:
            inner = ", ".join(
                f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
            )
            return f"{type(self).__name__}({inner})"

        def __getnewargs__(self) -> tuple[Any, ...]:
            return tuple(self)

    class _Record(type):
        def __new__(cls, name: str, bases: tuple[type, ...], body: dict[str, Any]) -> type:
            if not bases:  # NamedTuple itself
                return super().__new__(cls, name, bases, body)
            if bases != (NamedTuple,):
                raise TypeError(f"{name}: a NamedTuple has no other base (uwf.util.tuples)")
            if "__classcell__" in body:
                raise TypeError(f"{name}: a NamedTuple's methods cannot use super()")
            fields = tuple(body.get("__annotations__", {}))
            defaults = {field: body[field] for field in fields if field in body}
            for field in fields[len(fields) - len(defaults) :]:
                if field not in defaults:
                    raise TypeError(
                        f"Non-default namedtuple field {field} cannot follow default field"
                    )
            made: dict[str, Any] = {
                "__slots__": (),
                "__module__": body["__module__"],
                "__qualname__": body["__qualname__"],
                "__doc__": body.get("__doc__", f"{name}({', '.join(fields)})"),
                "__annotations__": body.get("__annotations__", {}),
                "_fields": fields,
                "_field_defaults": defaults,
                "_tail": tuple(defaults.values()),
                "__match_args__": fields,
            }
            for index, field in enumerate(fields):
                if field.startswith("_"):
                    raise ValueError(f"Field names cannot start with an underscore: {field!r}")
                made[field] = _tuplegetter(index, f"Alias for field number {index}")
            for key, value in body.items():
                if key in _OWN:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in _BODY and key not in fields:
                    made[key] = value
            return type(name, (_Tuple,), made)

    class NamedTuple(metaclass=_Record):
        """The base of a record: ``class Name(NamedTuple)`` with annotated fields."""
