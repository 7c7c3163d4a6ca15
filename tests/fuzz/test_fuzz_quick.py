"""The quick fuzz tier: a few hundred mutated inputs per reader, deterministic; any escaping
exception, hang past the time limit or memory blow-up fails, naming its reproducer.

The long tier is ``python benchmarks/fuzz_readers.py`` (>= 100,000 inputs per reader)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import require

from .harness import fuzz
from .readers import READERS

COUNT = int(os.environ.get("ROCM_PACKAGING_FUZZ_COUNT", "300"))


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_quick_fuzz(reader: object, tmp_path: Path) -> None:
    from .harness import Reader

    assert isinstance(reader, Reader)
    if reader.name in ("elf", "transform"):
        # the real seeds (a hipcc-built fat library) are mandatory in CI
        require(len(reader.seeds()) >= 2, "hipcc is not installed: no real fat-binary seed")
    if reader.name == "pe":
        require(len(reader.seeds()) >= 2, "clang-15/lld-link-15 are not installed: no PE seed")
    (stats,) = fuzz([reader], count=COUNT, seed=20261124, findings_dir=tmp_path, time_limit=5.0)
    assert stats.inputs == COUNT
    # the mutations must reach the readers' checks, not all bounce off the first one
    assert stats.refused > COUNT // 20, f"{reader.name}: only {stats.refused} refusals"
    report = "\n".join(f"{f.kind}: {f.reproducer}\n{f.detail}" for f in stats.findings[:5])
    assert not stats.findings, f"{len(stats.findings)} findings for {reader.name}:\n{report}"
