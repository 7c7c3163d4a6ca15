"""LLVM generic targets (``gfx9-4-generic``) and the processors they serve.

The table is data (``manifests/generic_targets.yaml``). The ROCm runtime looks a kernel up
for the agent's ISA first and then for the agent's generic target with the agent's
features carried over (``kpack.md`` §7); :meth:`GenericTable.lookup_targets` gives that
order, and :meth:`GenericTable.device_keys` the device packages a processor's user needs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

from kpack.common.data import manifest_path
from kpack.common.frozen import frozen
from kpack.common.yamlfile import read_yaml
from kpack.errors import ManifestError
from kpack.targets import base_target, is_processor, looks_generic, target_order

__all__ = [
    "GENERIC_TARGETS_YAML",
    "GenericTable",
    "generic_table",
    "load_generic_table",
]

GENERIC_TARGETS_YAML = "generic_targets.yaml"


@frozen
class GenericTable:
    """Generic target -> member processors, and the reverse map."""

    members: Mapping[str, tuple[str, ...]]
    source: str

    @functools.cached_property
    def _generic_of(self) -> dict[str, str]:
        return {p: g for g, procs in self.members.items() for p in procs}

    def is_generic(self, target: str) -> bool:
        """True for a generic target of the table, with or without features."""
        return base_target(target) in self.members

    def generic_of(self, target: str) -> str | None:
        """The generic target serving ``target``'s processor (``gfx942:xnack-`` ->
        ``gfx9-4-generic``), or None (a generic target, or a processor outside the table)."""
        return self._generic_of.get(base_target(target))

    def generic_target_id(self, target: str) -> str | None:
        """``target`` with its processor replaced by its generic target, features kept
        (``gfx942:sramecc+:xnack-`` -> ``gfx9-4-generic:sramecc+:xnack-``), or None."""
        generic = self.generic_of(target)
        if generic is None:
            return None
        _processor, sep, features = target.partition(":")
        return generic + sep + features

    def lookup_targets(self, target: str) -> tuple[str, ...]:
        """The arch list the runtime tries for an agent: its ISA, then its generic."""
        generic = self.generic_target_id(target)
        return (target,) if generic is None else (target, generic)

    def device_keys(self, target: str, available: Iterable[str]) -> tuple[str, ...]:
        """The base targets among ``available`` whose device code a ``target`` user needs:
        the processor's own (if available), then its generic's (if available). A generic
        target needs only itself."""
        present = {base_target(t) for t in available}
        wanted = [base_target(target)]
        generic = self.generic_of(target)
        if generic is not None:
            wanted.append(generic)
        return tuple(t for t in wanted if t in present)

    def served_processors(self, available: Iterable[str]) -> tuple[str, ...]:
        """Every processor with device code among ``available``: the non-generic bases
        plus every member of an available generic target, sorted."""
        out: set[str] = set()
        for target in available:
            base = base_target(target)
            out.update(self.members.get(base, (base,)))
        return tuple(sorted(out, key=target_order))

    def unknown_generic(self, targets: Iterable[str]) -> tuple[str, ...]:
        """Targets spelled as a generic target that the table does not list, sorted."""
        unknown = {t for t in targets if looks_generic(t) and not self.is_generic(t)}
        return tuple(sorted(unknown, key=target_order))


def load_generic_table(path: Path | None = None) -> GenericTable:
    """Load and validate a generic-target table (the shipped one by default)."""
    path = path or manifest_path(GENERIC_TARGETS_YAML)
    doc = read_yaml(path, error=ManifestError)
    table = doc.get("generic_targets") if isinstance(doc, dict) else None
    if not isinstance(table, dict) or not table:
        raise ManifestError("missing mapping 'generic_targets'", path=path)
    members: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for generic, procs in table.items():
        key = f"generic_targets.{generic}"
        if not isinstance(generic, str) or not (
            looks_generic(generic) and base_target(generic) == generic
        ):
            raise ManifestError(
                f"{key}: not an LLVM generic target name (gfx<N>[-<M>]-generic)", path=path
            )
        if not isinstance(procs, list) or not procs:
            raise ManifestError(f"{key}: expected a non-empty list of processors", path=path)
        for proc in procs:
            if not isinstance(proc, str) or not is_processor(proc):
                raise ManifestError(f"{key}: {proc!r} is not a processor (gfx<hex>)", path=path)
            if proc in owner:
                raise ManifestError(
                    f"{key}: {proc} is already a member of {owner[proc]}; a processor has at "
                    "most one generic target",
                    path=path,
                )
            owner[proc] = generic
        members[generic] = tuple(sorted(set(procs)))
    return GenericTable(dict(sorted(members.items())), str(path))


@functools.cache
def generic_table() -> GenericTable:
    """The shipped table, loaded once."""
    return load_generic_table()
