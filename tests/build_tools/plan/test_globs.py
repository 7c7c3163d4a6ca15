from __future__ import annotations

import pytest

from build_tools.plan._globs import GlobSet, compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "ok"),
    [
        ("**/cmake/**", "lib/cmake/hip/hip-config.cmake", True),
        ("**/cmake/**", "cmake/x.cmake", True),
        ("**/cmake/**", "lib/cmakefoo/x", False),
        ("bin/rocprof-*", "bin/rocprof-sys-run", True),
        ("bin/rocprof-*", "bin/sub/rocprof-x", False),
        ("**/*.so", "a.so", True),
        ("**/*.so", "lib/a/b.so", True),
        ("**/*.so", "lib/a.so.1", False),
        ("lib/**", "lib", True),
        ("lib/**", "lib/x/y", True),
        ("lib/**", "libx", False),
        # TheRock's '?' matches any RUN of characters within one segment
        ("lib/libfoo?.so", "lib/libfooXYZ.so", True),
        ("lib/libfoo?.so", "lib/libfoo.so", True),
        ("lib/libfoo?.so", "lib/libfoo/x.so", False),
        ("a.b", "aXb", False),  # regex metacharacters are literal
    ],
)
def test_dialect(pattern: str, path: str, ok: bool) -> None:
    assert bool(compile_glob(pattern).match(path)) is ok


def test_globset_any() -> None:
    g = GlobSet.of(["bin/x", "lib/**"])
    assert g.matches("lib/a") and g.matches("bin/x") and not g.matches("bin/y")
