"""Database handlers: map per-arch database files to the shard they belong to (kpack.md §4).

The handlers are data (``manifests/databases.yaml``), validated on load; this module
turns them into frozen :class:`Handler` values and matches stage-relative paths against
them. Nothing here touches the files themselves.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, overload

from kpack.common.data import manifest_path
from kpack.common.frozen import frozen
from kpack.common.yamlfile import read_yaml
from kpack.errors import ManifestError, UsageError

__all__ = [
    "DatabaseMatch",
    "Handler",
    "base_arch",
    "handler_names",
    "lazy_handler_names",
    "load_handlers",
    "match_database",
]

log = logging.getLogger(__name__)

DATABASES_YAML = "databases.yaml"
_ARCH_RE = re.compile(r"gfx[0-9a-f]+(?:-strict)?")
_KEY_RE = re.compile(r"gfx[0-9a-z_]+")
_TENSILE_FEATURE_RE = re.compile(r"-(xnack[+-]?|sramecc[+-]?)")


def base_arch(text: str) -> str:
    """Tensile ``-xnack±`` becomes ``:xnack±``, then everything from the first ``:`` goes.

    ``gfx90a-xnack+`` -> ``gfx90a``; ``gfx942:sramecc+:xnack-`` -> ``gfx942``.
    """
    return _TENSILE_FEATURE_RE.sub(r":\1", text).split(":", 1)[0]


@frozen
class Handler:
    """One database handler: path rules, an optional explicit arch list, family keys."""

    name: str
    description: str = field(repr=False)
    rules: tuple[re.Pattern[str], ...] = field(repr=False)
    arches: tuple[str, ...] = field(default=(), repr=False)
    families: tuple[tuple[re.Pattern[str], str], ...] = field(default=(), repr=False)

    def arch_key(self, relpath: str) -> str | None:
        """The shard key of ``relpath`` (stage-relative, POSIX), or ``None``."""
        for rule in self.rules:
            found = rule.search(relpath)
            if found is None:
                continue
            arch = found.group("arch")
            if "strict" in rule.groupindex and found.group("strict"):
                arch += "-strict"  # CK's sanitized gfx1250_strict
            key = self._listed(arch)
            if key is not None:
                return self.family_key(key)
        return None

    def family_key(self, arch: str) -> str:
        """Apply the family mapping (``gfx1100`` -> ``gfx11`` for AOTriton)."""
        for pattern, key in self.families:
            if pattern.fullmatch(arch):
                return key
        return arch

    def scope_key(self, target: str) -> str:
        """The key a ``--gpu-targets`` entry selects: its base arch, family-mapped."""
        return self.family_key(base_arch(target))

    def _listed(self, text: str) -> str | None:
        if not self.arches:
            return text
        prefixes = [a for a in self.arches if text.startswith(a)]
        return max(prefixes, key=len) if prefixes else None


@frozen
class DatabaseMatch:
    """A file claimed by ``handler``: its shard key and the key's base arch."""

    handler: Handler
    arch_key: str
    base_arch: str

    def in_scope(self, gpu_targets: Iterable[str] | None) -> bool:
        """Whether this shard is produced here (``None`` = every target is in scope)."""
        if gpu_targets is None:
            return True
        return self.base_arch in {self.handler.scope_key(t) for t in gpu_targets}


def match_database(relpath: str, handlers: Iterable[Handler]) -> DatabaseMatch | None:
    """The first handler claiming ``relpath`` (stage-relative, POSIX), or ``None``."""
    for handler in handlers:
        key = handler.arch_key(relpath)
        if key is not None:
            return DatabaseMatch(handler, key, base_arch(key))
    return None


def handler_names(path: Path | None = None) -> tuple[str, ...]:
    """Names of every handler in the YAML, in file order."""
    return tuple(h.name for h in _handlers(path))


class _ShippedNames(Sequence[str]):
    """:func:`handler_names` of the shipped manifest, read when first looked into."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return handler_names()[index]

    def __len__(self) -> int:
        return len(handler_names())


def lazy_handler_names() -> Sequence[str]:
    """The shipped handlers' names, read (with the manifest) only when an option's
    choices are checked or listed: a parser that offers them as choices does not read the
    manifest, nor import PyYAML, for a command that does not give the option."""
    return _ShippedNames()


def load_handlers(
    names: Sequence[str] | None = None, *, path: Path | None = None
) -> tuple[Handler, ...]:
    """Load and validate the handlers; keep ``names`` (all when ``None``) in file order.

    File order is the match precedence, whatever order ``names`` lists them in.
    Raises :class:`ManifestError` for an invalid YAML file (naming file and key) and
    :class:`UsageError` for an unknown handler name.
    """
    handlers = _handlers(path)
    if names is None:
        return handlers
    known = {h.name for h in handlers}
    unknown = sorted(set(names) - known)
    if unknown:
        raise UsageError(
            f"unknown database handler(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    wanted = set(names)
    return tuple(h for h in handlers if h.name in wanted)


# --- loading and validation ---------------------------------------------------------------


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, key: str, message: str) -> None:
        self.items.append(f"{key}: {message}")


def _handlers(path: Path | None) -> tuple[Handler, ...]:
    """The handlers of ``path``, or of the shipped manifest (read once per process: a
    command's parser lists the names and its run loads them)."""
    return _shipped() if path is None else _load_all(path)


@functools.cache
def _shipped() -> tuple[Handler, ...]:
    return _load_all(manifest_path(DATABASES_YAML))


def _load_all(path: Path) -> tuple[Handler, ...]:
    raw = read_yaml(path, error=ManifestError)
    problems = _Problems()
    handlers: list[Handler] = []
    if not isinstance(raw, dict) or set(raw) != {"handlers"}:
        problems.add("handlers", "the document must be a mapping with the one key 'handlers'")
    elif not isinstance(raw["handlers"], dict) or not raw["handlers"]:
        problems.add("handlers", "expected a non-empty mapping of handler name -> handler")
    else:
        for name, body in raw["handlers"].items():
            handler = _handler(problems, str(name), body)
            if handler is not None:
                handlers.append(handler)
    if problems.items:
        raise ManifestError("invalid database handler manifest", path=path, problems=problems.items)
    log.debug("loaded %d database handlers from %s", len(handlers), path)
    return tuple(handlers)


def _handler(problems: _Problems, name: str, body: Any) -> Handler | None:
    key = f"handlers.{name}"
    before = len(problems.items)
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        problems.add(key, "handler names are lower-case letters, digits, '-' and '_'")
    if not isinstance(body, dict):
        problems.add(key, f"expected a mapping, got {type(body).__name__}")
        return None
    for extra in sorted(set(body) - {"description", "rules", "arches", "families"}, key=str):
        problems.add(f"{key}.{extra}", "unknown key")
    description = body.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.add(f"{key}.description", "expected a non-empty string")
    rules = _rules(problems, f"{key}.rules", body.get("rules"))
    arches = _arches(problems, f"{key}.arches", body.get("arches", []))
    families = _families(problems, f"{key}.families", body.get("families", []))
    if len(problems.items) != before:
        return None
    return Handler(name, " ".join(str(description).split()), rules, arches, families)


def _compile(problems: _Problems, key: str, text: Any) -> re.Pattern[str] | None:
    if not isinstance(text, str) or not text:
        problems.add(key, f"expected a regular expression string, got {text!r}")
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        problems.add(key, f"invalid regular expression: {exc}")
        return None


def _rules(problems: _Problems, key: str, raw: Any) -> tuple[re.Pattern[str], ...]:
    if not isinstance(raw, list) or not raw:
        problems.add(key, "expected a non-empty list of regular expressions")
        return ()
    out: list[re.Pattern[str]] = []
    for index, text in enumerate(raw):
        pattern = _compile(problems, f"{key}[{index}]", text)
        if pattern is None:
            continue
        if "arch" not in pattern.groupindex:
            problems.add(f"{key}[{index}]", "needs a named group (?P<arch>...)")
            continue
        out.append(pattern)
    return tuple(out)


def _arches(problems: _Problems, key: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        problems.add(key, f"expected a list of gfx arches, got {raw!r}")
        return ()
    bad = [a for a in raw if not isinstance(a, str) or not _ARCH_RE.fullmatch(a)]
    if bad:
        problems.add(key, f"not gfx<hex>[-strict] arch names: {bad!r}")
    dupes = sorted({a for a in raw if isinstance(a, str) and raw.count(a) > 1})
    if dupes:
        problems.add(key, f"listed twice: {', '.join(dupes)}")
    return tuple(a for a in raw if isinstance(a, str))


def _families(problems: _Problems, key: str, raw: Any) -> tuple[tuple[re.Pattern[str], str], ...]:
    if not isinstance(raw, list):
        problems.add(key, f"expected a list of {{match, key}} mappings, got {raw!r}")
        return ()
    out: list[tuple[re.Pattern[str], str]] = []
    for index, item in enumerate(raw):
        where = f"{key}[{index}]"
        if not isinstance(item, Mapping) or set(item) != {"match", "key"}:
            problems.add(where, "expected a mapping with exactly the keys 'match' and 'key'")
            continue
        pattern = _compile(problems, f"{where}.match", item["match"])
        target = item["key"]
        if not isinstance(target, str) or not _KEY_RE.fullmatch(target):
            problems.add(f"{where}.key", f"expected gfx<letters, digits, _>, got {target!r}")
            continue
        if pattern is not None:
            out.append((pattern, target))
    return tuple(out)
