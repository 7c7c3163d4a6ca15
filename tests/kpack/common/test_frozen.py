"""``@frozen`` against ``@dataclass(frozen=True)`` itself: the same class defined both ways
gives the same repr, equality, hash, immutability, fields and errors."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import KW_ONLY, FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kpack.common.frozen import frozen

ROOT = Path(__file__).resolve().parents[3]
Decorator = Callable[[type], Any]
NAN = float("nan")  # one object: a NaN hashes by its identity


def _plain(dec: Decorator) -> Any:
    @dec
    class Plain:
        """Fields of every kind: a default, a factory, one left out of the repr, one out of
        the comparison, one hashed though not compared."""

        name: str
        size: int = 0
        parts: tuple[str, ...] = ()
        tags: frozenset[str] = field(default_factory=frozenset)
        secret: str = field(default="s", repr=False)
        note: str = field(default="", compare=False)
        salt: int = field(default=0, compare=False, hash=True)

    return Plain


def _one(dec: Decorator) -> Any:
    @dec
    class One:
        value: float

    return One


def _none(dec: Decorator) -> Any:
    @dec
    class Empty:
        pass

    return Empty


def _own(dec: Decorator) -> Any:
    @dec
    class Own:
        """A body's own __repr__ and __eq__ are kept (and a hash made, as a dataclass
        makes one for a body defining __eq__ alone)."""

        key: str
        extra: int = 0

        def __repr__(self) -> str:
            return f"<{self.key}>"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own) and other.key == self.key

    return Own


def _own_hash(dec: Decorator) -> Any:
    @dec
    class OwnHash:
        key: str

        def __hash__(self) -> int:
            return 7

    return OwnHash


STD: Decorator = dataclass(frozen=True)
#: each model's values: some equal, some not
EXAMPLES: dict[Callable[[Decorator], Any], list[dict[str, Any]]] = {
    _plain: [
        {"name": "a"},
        {"name": "a"},
        {"name": "a", "size": 2, "parts": ("x",), "tags": frozenset({"t"})},
        {"name": "a", "note": "differs, not compared"},
        {"name": "a", "salt": 5, "note": "x"},
        {"name": "b", "secret": "hidden"},
    ],
    _one: [{"value": v} for v in ("a", "a", "b", 1.5, NAN)],
    _none: [{}, {}],
    _own: [{"key": "a"}, {"key": "a", "extra": 1}, {"key": "b"}],
    _own_hash: [{"key": "a"}, {"key": "b"}],
}
MODELS = list(EXAMPLES)


def _values(make: Callable[[Decorator], Any], dec: Decorator) -> list[Any]:
    cls = make(dec)
    return [cls(**kwargs) for kwargs in EXAMPLES[make]]


def _behaviour(make: Callable[[Decorator], Any], dec: Decorator) -> list[object]:
    values = _values(make, dec)
    seen: list[object] = [
        [f.name for f in dataclasses.fields(values[0])],
        str(__import__("inspect").signature(type(values[0]))),
    ]
    for a in values:
        seen.append(repr(a).replace(type(a).__qualname__, "X"))
        seen.append(hash(a))
        seen.append([a == b for b in values])
        seen.append(a == object())
        seen.append(a.__eq__(object()))
        seen.append(dataclasses.asdict(a))
    return seen


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__.strip("_"))
def test_the_same_as_a_frozen_dataclass(make: Callable[[Decorator], Any]) -> None:
    assert _behaviour(make, frozen) == _behaviour(make, STD)


def test_a_nan_field_equals_itself_as_in_a_dataclass() -> None:
    nan = float("nan")
    ours, std = _one(frozen), _one(STD)
    assert (ours(nan) == ours(nan)) is (std(nan) == std(nan)) is True
    assert (ours(float("nan")) == ours(nan)) is (std(float("nan")) == std(nan)) is False


def test_immutable_and_replaceable() -> None:
    cls = _plain(frozen)
    value = cls(name="a", size=1)
    with pytest.raises(FrozenInstanceError):
        value.size = 2
    with pytest.raises(FrozenInstanceError):
        del value.name
    assert dataclasses.replace(value, size=3) == cls(name="a", size=3)
    assert dataclasses.fields(value)[0].name == "name"


def test_keyword_only() -> None:
    @frozen(kw_only=True)
    class Keyed:
        a: int
        b: int = 1

    @frozen
    class Mixed:
        a: int
        _: KW_ONLY
        b: int

    assert Keyed(a=1) == Keyed(a=1, b=1)
    with pytest.raises(TypeError, match="positional"):
        Keyed(1)  # type: ignore[misc]
    assert repr(Mixed(1, b=2)).endswith("Mixed(a=1, b=2)")
    with pytest.raises(TypeError, match="positional"):
        Mixed(1, 2)  # type: ignore[misc]


def test_inheritance_compares_the_very_class() -> None:
    @frozen
    class Base:
        a: int

    @frozen
    class Child(Base):
        b: int = 0

    assert Child(1, 2) == Child(1, 2) != Child(1, 3)
    assert Base(1) != Child(1)
    assert repr(Child(1)).endswith("Child(a=1, b=0)")
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclass
        class Thawed(Base):
            c: int = 0


def test_a_value_containing_itself_shows_dots() -> None:
    @frozen
    class Box:
        items: list[object]

    @dataclass(frozen=True)
    class StdBox:
        items: list[object]

    box, std = Box([]), StdBox([])
    box.items.append(box)
    std.items.append(std)
    assert repr(box).endswith(".Box(items=[...])")
    assert repr(std).endswith(".StdBox(items=[...])")


def test_pickles_across_processes() -> None:
    """A module-level class's values cross a process boundary (the worker pool)."""
    code = (
        "import pickle, sys\n"
        "from kpack.elf.structs import Phdr\n"
        "p = Phdr(p_type=1, p_flags=5, p_offset=0, p_vaddr=0, p_paddr=0, p_filesz=8,"
        " p_memsz=8, p_align=4096)\n"
        "sys.stdout.buffer.write(pickle.dumps(p))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                         capture_output=True).stdout  # fmt: skip
    from kpack.elf.structs import Phdr

    value = pickle.loads(out)
    assert (
        isinstance(value, Phdr) and value.p_filesz == 8 and hash(value) == hash(pickle.loads(out))
    )
