"""Package owners (``manifests/target_owners.yaml``) against rocm-bootstrap's, and the
``-strict`` target spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpack.databases import load_handlers, match_database
from kpack.errors import ManifestError
from kpack.owners import load_owner_table, owner_table, package_owner
from kpack.targets import is_isa_target, is_target_id
from kpack.wheelsplit._bundles import bundle_key


def test_the_table_is_rocm_bootstraps() -> None:
    package_metadata = pytest.importorskip("rocm_bootstrap.package_metadata")
    data = package_metadata.ownership_data()
    assert data["schema_version"] == 1
    assert dict(owner_table().owners) == data["package_owners"]
    for target in ("gfx1250-strict", "gfx1250", "gfx90a:xnack+", "gfx942", "gfx11-generic"):
        assert package_owner(target) == package_metadata.package_owner(target), target


def test_strict_is_a_target_id() -> None:
    for target in ("gfx1250-strict", "gfx1250-strict:xnack-"):
        assert is_isa_target(target) and is_target_id(target)
    assert not is_isa_target("gfx1250-lax")
    assert not is_isa_target("gfx12-strict-generic")
    assert package_owner("gfx1250-strict:xnack-") == "gfx1250"
    assert bundle_key("gfx1250-strict") == "gfx1250"
    assert bundle_key("gfx90a:xnack+") == "gfx90a"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("package_owners: {gfx1250-strict: gfx1250, gfx1250: gfx1251}\n", "has an owner itself"),
        ("package_owners: {gfx1250-strict: gfx12-5-generic}\n", "not a processor"),
        ("package_owners: {'gfx1250:xnack+': gfx1250}\n", "without features"),
        ("owners: {}\n", "missing mapping"),
    ],
)
def test_bad_tables(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "owners.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_owner_table(path)


@pytest.mark.parametrize(
    ("relpath", "key"),
    [
        ("lib/rocblas/library/gfx1250-strict/Kernels.co", "gfx1250-strict"),
        ("lib/rocblas/library/TensileLibrary_lazy_gfx1250-strict.dat", "gfx1250-strict"),
        ("lib/hipblaslt/library/Kernels.so-000-gfx1250-strict-xnack-.hsaco", "gfx1250-strict"),
        ("lib/hipsparselt/library/gfx1250/Kernels.co", "gfx1250"),
        ("lib/rocblas/library/TensileLibrary_lazy_gfx90a-xnack+.dat", "gfx90a"),
    ],
)
def test_tensile_databases_of_strict_targets(relpath: str, key: str) -> None:
    """A ``-strict`` Tensile directory or file name is its own database key (its archive
    artifact is ``P_gfx1250-strict``); the wheels group it under its owner."""
    found = match_database(relpath, load_handlers(["rocblas", "hipblaslt", "hipsparselt"]))
    assert found is not None and found.base_arch == key
    assert bundle_key(found.arch_key) == package_owner(key)
