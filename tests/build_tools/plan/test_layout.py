"""Re-layout rules (packages.md §6) on a synthetic namespace with given ELF facts."""

from __future__ import annotations

from pathlib import Path

from build_tools.artifacts import scan_artifacts
from build_tools.plan._layout import layout_runtime
from build_tools.plan._namespace import merge
from kpack.elf import ElfInfo, FileKind
from tests.build_tools.treeutil import add_artifact, write_manifest


def _info(path: Path, kind: FileKind, soname: str | None = None) -> ElfInfo:
    return ElfInfo(
        path=path,
        kind=kind,
        soname=soname,
        needed=(),
        rpath=None,
        runpath=None,
        interp=None,
        has_hip_fatbin=False,
    )


def _setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    write_manifest(tmp_path)
    add_artifact(
        tmp_path,
        "core-hip_lib_generic",
        "stage",
        {
            "lib/libfoo.so.1.2.3": b"real",
            "lib/libfoo.so.1": "symlink:libfoo.so.1.2.3",
            "lib/libfoo.so": "symlink:libfoo.so.1",
            "lib/libbar.so.2.0": b"bar",  # SONAME libbar.so.2, nothing named so
            "lib/libplain.so": b"plain",  # no SONAME
            "lib/dangling.so": "symlink:nothere.so",
            "lib/dirlink": "symlink:../share",
            "share/data.txt": b"data",
            "share/alias.txt": "symlink:data.txt",
            "libexec/tool": b"\x7fELFexe",
            "bin/tool": "symlink:../libexec/tool",
        },
    )
    cat = scan_artifacts(tmp_path)
    ns = merge(cat.select(["core-hip"], ["lib"], ["generic"]))
    src = {e.relpath: e.source for e in ns}
    elf = {
        src["lib/libfoo.so.1.2.3"]: _info(
            src["lib/libfoo.so.1.2.3"], FileKind.SHARED_LIBRARY, "libfoo.so.1"
        ),
        src["lib/libbar.so.2.0"]: _info(
            src["lib/libbar.so.2.0"], FileKind.SHARED_LIBRARY, "libbar.so.2"
        ),
        src["lib/libplain.so"]: _info(src["lib/libplain.so"], FileKind.SHARED_LIBRARY, None),
        src["libexec/tool"]: _info(src["libexec/tool"], FileKind.EXECUTABLE),
        src["share/data.txt"]: None,
    }
    return ns, layout_runtime(ns, elf), src


def test_soname_rule(tmp_path: Path) -> None:
    _, lay, src = _setup(tmp_path)
    # the link named by the SONAME becomes the real file; the rest are aliases
    assert lay.files["lib/libfoo.so.1"].source == src["lib/libfoo.so.1.2.3"]
    assert "lib/libfoo.so.1.2.3" not in lay.files and "lib/libfoo.so" not in lay.files
    assert lay.aliases["lib/libfoo.so.1.2.3"] == "libfoo.so.1"
    assert lay.aliases["lib/libfoo.so"] == "libfoo.so.1"
    assert "lib/libplain.so" in lay.files


def test_soname_materialised_when_nothing_is_named_by_it(tmp_path: Path) -> None:
    _, lay, src = _setup(tmp_path)
    assert lay.files["lib/libbar.so.2"].source == src["lib/libbar.so.2.0"]
    assert any("libbar.so.2" in w for w in lay.warnings)


def test_links_dropped_copied_or_launched(tmp_path: Path) -> None:
    _, lay, src = _setup(tmp_path)
    assert "lib/dangling.so" not in lay.files
    assert any("dangling" in w for w in lay.warnings)
    assert "lib/dirlink" not in lay.files
    assert lay.files["share/alias.txt"].source == src["share/data.txt"]
    stub = lay.files["bin/tool"]
    assert stub.launcher_target == "../libexec/tool" and stub.source is None and stub.executable
    assert lay.files["libexec/tool"].source == src["libexec/tool"]


def test_no_symlink_ever_ships(tmp_path: Path) -> None:
    _, lay, _ = _setup(tmp_path)
    for laid in lay.files.values():
        assert laid.source is None or not laid.source.is_symlink()
