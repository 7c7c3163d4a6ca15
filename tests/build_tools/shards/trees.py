"""The real sample tree as TheRock's archives, for the shard-plan simulations: kpack mode
pre-split as TheRock's split lays it out (``P_generic`` + ``P_<isa>``), or legacy."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.build_tools.archive_kit import pack_tree
from tests.conftest import require


def sample_archives(tmp: Path, kpack: bool) -> Path:
    """A directory of ``{name}_{component}_{target}.tar.zst`` archives, one per artifact."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from kpack.split import split_artifact
    from sample_tree.make_sample_tree import make_sample_tree

    tree = make_sample_tree(tmp / "tree", cache_dir=None, family="gfx90a-dcgpu", kpack_split=kpack)
    if kpack:
        for name in ("rand_lib_generic", "fft_lib_generic"):
            src = tmp / "fat" / name
            src.parent.mkdir(exist_ok=True)
            shutil.move(str(tree / name), src)
            split_artifact(src, tree, prefix=name.rsplit("_", 1)[0])
    return pack_tree(tree, tmp / "archives")
