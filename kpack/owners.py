"""Package owners: the device package that ships a target's code.

A target normally owns its own package (``gfx942:xnack-`` -> ``gfx942``: features are never
part of an owner). A few targets share another's (``gfx1250-strict`` -> ``gfx1250``): the
table is data (``manifests/target_owners.yaml``), the same as rocm-bootstrap's
``package_metadata.ownership_data()``, and every builder, splitter and runtime reader
takes the owner from here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

from kpack.common.data import manifest_path
from kpack.common.frozen import frozen
from kpack.common.yamlfile import read_yaml
from kpack.errors import ManifestError
from kpack.targets import base_target, is_isa_target, is_processor

__all__ = [
    "TARGET_OWNERS_YAML",
    "OwnerTable",
    "load_owner_table",
    "owner_table",
    "package_owner",
]

TARGET_OWNERS_YAML = "target_owners.yaml"


@frozen
class OwnerTable:
    """Target (no features) -> its owner, for the targets that do not own themselves."""

    owners: Mapping[str, str]
    source: str

    def owner(self, target: str) -> str:
        """``gfx1250-strict:xnack-`` -> ``gfx1250``; ``gfx942:sramecc+`` -> ``gfx942``."""
        base = base_target(target)
        return self.owners.get(base, base)

    def members(self, owner: str, targets: Iterable[str]) -> tuple[str, ...]:
        """The targets among ``targets`` whose owner is ``owner``, sorted."""
        return tuple(sorted({t for t in targets if self.owner(t) == owner}))


def load_owner_table(path: Path | None = None) -> OwnerTable:
    """Load and validate an owner table (the shipped one by default)."""
    path = path or manifest_path(TARGET_OWNERS_YAML)
    doc = read_yaml(path, error=ManifestError)
    table = doc.get("package_owners") if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ManifestError("missing mapping 'package_owners'", path=path)
    owners: dict[str, str] = {}
    for target, owner in table.items():
        key = f"package_owners.{target}"
        if not isinstance(target, str) or not is_isa_target(target) or ":" in target:
            raise ManifestError(f"{key}: not a target without features", path=path)
        if not isinstance(owner, str) or not is_processor(owner):
            raise ManifestError(f"{key}: owner {owner!r} is not a processor (gfx<hex>)", path=path)
        if owner in table:
            raise ManifestError(f"{key}: owner {owner} has an owner itself", path=path)
        owners[target] = owner
    return OwnerTable(dict(sorted(owners.items())), str(path))


@functools.cache
def owner_table() -> OwnerTable:
    """The shipped table, loaded once."""
    return load_owner_table()


def package_owner(target: str) -> str:
    """The device package owning ``target``'s code, after the shipped table."""
    return owner_table().owner(target)
