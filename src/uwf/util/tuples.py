"""``NamedTuple`` as ``typing`` spells it, built for less at import (docs/performance.md,
"Start-up").

``class Failure(NamedTuple): …`` with ``typing.NamedTuple`` checks every field's annotation
as a type; under postponed annotations each is a string, which the check compiles (a
``ForwardRef``). A record of twelve fields cost ~2.5 M instructions to define, and the read
path defines some twenty of them. This ``NamedTuple`` makes the same class — what
``collections.namedtuple`` returns, with the body's methods, docstring and (string)
``__annotations__`` — without checking the annotations: mypy checks them, and nothing reads
them at run time. Type checkers see ``typing.NamedTuple`` itself.

Like ``typing.NamedTuple``: a field without a default after one with a default is a
``TypeError``, and a method cannot replace an attribute the tuple class defines. Not
supported (``TypeError``): a generic record, another base, ``super()`` in a method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["NamedTuple"]

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    from collections import namedtuple

    # what the class body holds that is not a field or a method of the record
    _BODY = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__"})
    # what collections.namedtuple defines, that a body must not replace
    _OWN = frozenset(
        {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults"}
        | {"_make", "_replace", "_asdict", "_source", "__match_args__"}
    )

    class _Record(type):
        def __new__(cls, name: str, bases: tuple[type, ...], body: dict[str, Any]) -> type:
            if not bases:  # NamedTuple itself
                return super().__new__(cls, name, bases, body)
            if bases != (NamedTuple,):
                raise TypeError(f"{name}: a NamedTuple has no other base (uwf.util.tuples)")
            if "__classcell__" in body:
                raise TypeError(f"{name}: a NamedTuple's methods cannot use super()")
            fields = body.get("__annotations__", {})
            defaults = [body[field] for field in fields if field in body]
            for field in list(fields)[len(fields) - len(defaults) :]:
                if field not in body:
                    raise TypeError(
                        f"Non-default namedtuple field {field} cannot follow default field"
                    )
            record = namedtuple(name, fields, defaults=defaults, module=body["__module__"])
            record.__qualname__ = body["__qualname__"]
            record.__annotations__ = fields
            if "__doc__" in body:
                record.__doc__ = body["__doc__"]
            for key, value in body.items():
                if key in _OWN:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in _BODY and key not in fields:
                    setattr(record, key, value)
            return record

    class NamedTuple(metaclass=_Record):
        """The base of a record: ``class Name(NamedTuple)`` with annotated fields."""
