"""Package faces that import a name's module when the name is first used (PEP 562).

A command pays at start-up for every module it imports, and a face that imports all of its
package makes each command import every tool's modules: ``kpack split-wheel`` would load the
artifact splitter, the recombiner and the builder's planner it never calls. A lazy face maps
each public name to the private module defining it; ``from kpack.split import split_fat``
then imports ``kpack.split._fat`` (and what that needs) and nothing else. The face keeps the
same names: type checkers read them from imports under ``TYPE_CHECKING``, and
``tests/kpack/common/test_lazy.py`` holds those imports and the map to each other::

    if TYPE_CHECKING:
        from kpack.split._fat import split_fat
    else:
        __getattr__, __dir__ = lazy_face(__name__, {"split_fat": "_fat"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_face"]


def lazy_face(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of the face of ``package``: ``names`` maps
    each public name to the module (relative to ``package``) that defines it. A name is
    imported once, then held by the face as any attribute."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
