"""Shared fixtures: real Debian ROCm inputs and the hipcc compiler.

Outside CI a missing input skips its tests with the reason; with ``CI=true`` (as
``.ci/run`` sets) the same condition fails, so real-input tests never silently vanish.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kpack.errors import ToolError
from sample_tree.debian_inputs import fetch_debs

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip (locally) or fail (in CI) when a real input or tool is unavailable."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def debian_package() -> Callable[[str], Path]:
    """Return a function mapping a Debian package name to its extracted root."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            try:
                cache[name] = fetch_debs([name])[name]
            except ToolError as exc:
                require(False, f"cannot fetch Debian package {name}: {exc}")
        return cache[name]

    return get


@pytest.fixture(scope="session", autouse=True)
def _subprocess_tmpdir() -> Iterator[None]:
    """Child processes get a private ``TMPDIR``, removed when the session ends.

    clang-15 (``hipcc``) leaves two empty ``<source>-XXXXXX`` directories in ``$TMPDIR`` for
    every compile; without this a test run leaves hundreds in ``/tmp``. Tests that check what
    a tool leaves in ``TMPDIR`` set their own.
    """
    path = tempfile.mkdtemp(prefix="rocm-packaging-tests-")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def hipcc() -> Path:
    """Path of a working ``hipcc`` (Debian's, clang-15 based)."""
    path = shutil.which("hipcc")
    require(path is not None, "hipcc is not installed (apt-get install hipcc)")
    assert path is not None
    return Path(path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """In CI a skipped test is a failure: real inputs and tools must all be there.

    The opt-in ``large`` tier is deselected by ``.ci/run`` (``-m "not large"``) unless
    ``ROCM_PACKAGING_LARGE=1`` asks for it, so it is never silently skipped either.
    """
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI (CI=true forbids skips): {reason}"
