"""Frozen dataclasses that cost less to define: :func:`frozen`.

``@dataclass(frozen=True)`` writes each class's ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` as source text and compiles it, about
0.5 ms a class on CPython 3.11; a split of a small wheel defines about a hundred such
classes before it starts, a third of its start-up. ``@frozen`` is the same dataclass (its
``__init__``, fields, ``replace``, ``asdict``, pickling, immutability), but its ``__repr__``,
``__eq__`` and ``__hash__`` are closures over the field names, made without compiling:
about half the cost. They give what the generated ones give: the repr
``Name(field=value!r, ...)`` of the fields with ``repr=True`` (``...`` for a value that
contains itself), equality with an instance of the very same class on the fields with
``compare=True`` (else ``NotImplemented``), the hash of those fields' tuple (or of those
whose ``hash=`` says so); a method the class body defines is kept, as a dataclass keeps
it. ``tests/kpack/common/test_frozen.py`` checks them against ``dataclass`` itself.
"""

from __future__ import annotations

from _thread import get_ident
from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

_T = TypeVar("_T", bound=type)
_F = TypeVar("_F")

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # read by type checkers only (and typing's is Python 3.11's)

    def dataclass_transform(**_: object) -> Callable[[_F], _F]:
        return lambda function: function


__all__ = ["frozen"]


@overload
@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(cls: _T, /) -> _T: ...
@overload
def frozen(*, kw_only: bool = False) -> Callable[[_T], _T]: ...


def frozen(cls: _T | None = None, /, *, kw_only: bool = False) -> _T | Callable[[_T], _T]:
    """``@dataclass(frozen=True)`` (``kw_only`` as the dataclass's) at about half the cost
    of defining the class."""

    def wrap(cls: _T) -> _T:
        return _frozen(cls, kw_only=kw_only)

    return wrap if cls is None else wrap(cls)


def _frozen(cls: _T, *, kw_only: bool) -> _T:
    own = cls.__dict__
    # as a dataclass decides: a __hash__ the body sets is kept, not the None Python sets
    # for a body that defines __eq__ alone
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    keep = {name for name in ("__repr__", "__eq__") if name in own}
    made: Any = dataclass(frozen=True, kw_only=kw_only, repr=False, eq=False)(cls)
    every = fields(made)
    values = _getter(tuple(f.name for f in every if f.compare))
    if "__repr__" not in keep:
        made.__repr__ = _repr(tuple(f.name for f in every if f.repr))
    if "__eq__" not in keep:
        made.__eq__ = _eq(values)
    if not explicit_hash:
        hashed = (f.name for f in every if (f.compare if f.hash is None else f.hash))
        made.__hash__ = _hash(_getter(tuple(hashed)))
    return cls


def _getter(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of an instance's ``names`` (a tuple for one name or none, too)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


def _repr(names: tuple[str, ...]) -> Callable[[object], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: object) -> str:
        key = (id(self), get_ident())
        if key in running:
            return "..."
        running.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object, object], bool]:
    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(values(self))

    return __hash__
