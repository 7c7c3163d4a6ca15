"""rocm_sdk.devel_status / is_devel_expanded and ``rocm-sdk init --check``: the devel
tree's state, read without changing anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.templates.rocm_sdk.test_devel import CTX, STANDARD, TOP, VERSION, make_site
from tests.templates.rocm_sdk.test_device_links import install_device
from tests.templates.tpl_kit import fake_install, importable, rocm_sdk_tree

PROFILER = "_rocm_profiler_v7"


def snapshot(site: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``site`` (but bytecode caches): kind, size and mtime, and the
    bytes of every RECORD, so a check that changed anything is caught."""
    seen: dict[str, tuple[int, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(site):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            data = path.read_bytes() if name == "RECORD" else b""
            seen[str(path.relative_to(site))] = (st.st_mode, st.st_mtime_ns, data)
    return seen


def check_cli(site: Path) -> subprocess.CompletedProcess[str]:
    """``python -m rocm_sdk init --check`` in a fresh interpreter on ``site``."""
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rocm_sdk", "init", "--check"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    members = [*STANDARD, ("sym", f"{TOP}/bin/rocprofv3", f"../../{PROFILER}/bin/rocprofv3")]
    path = make_site(tmp_path, members)
    with importable(path):
        yield path


def test_not_expanded_then_expanded(site: Path) -> None:
    import rocm_sdk
    from rocm_sdk._devel import get_devel_root

    before = snapshot(site)
    status = rocm_sdk.devel_status()
    assert (status.state, status.ok, status.fix) == ("not-expanded", False, "rocm-sdk init")
    assert status.root == site / TOP
    assert not rocm_sdk.is_devel_expanded()
    run = check_cli(site)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == (
        f"rocm-sdk: the devel tree is not expanded (it goes to {site / TOP}); fix: rocm-sdk init\n"
    )
    assert snapshot(site) == before  # nothing expanded, locked or recorded

    assert get_devel_root() == site / TOP
    expanded = snapshot(site)
    status = rocm_sdk.devel_status()
    assert status.ok and status.state == "expanded" and (status.reason, status.fix) == ("", "")
    assert rocm_sdk.is_devel_expanded()
    run = check_cli(site)
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == f"rocm-sdk: the devel tree is expanded and complete at {site / TOP}\n"
    assert snapshot(site) == expanded


def test_quiet_check_prints_nothing_when_ready(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rocm_sdk.__main__ import main

    assert main(["init", "--check", "--quiet"]) == 1
    assert "fix: rocm-sdk init" in capsys.readouterr().err  # a failure is always said
    assert main(["init", "--quiet"]) == 0
    assert main(["init", "--check", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_removed_file_needs_a_reinstall(site: Path) -> None:
    import rocm_sdk
    from rocm_sdk._devel import get_devel_root

    root = get_devel_root()
    (root / "lib" / "cmake" / "hip" / "hip-config.cmake").unlink()
    status = rocm_sdk.devel_status()
    assert status.state == "incomplete" and not rocm_sdk.is_devel_expanded()
    assert status.missing == (f"{TOP}/lib/cmake/hip/hip-config.cmake",)
    assert status.fix == f"pip install --force-reinstall --no-deps 'rocm-sdk-devel=={VERSION}'"
    run = check_cli(site)
    assert run.returncode == 1
    assert "1 of its files are gone" in run.stderr and status.fix in run.stderr


def test_interrupted_expansion_is_not_expanded(site: Path) -> None:
    import rocm_sdk

    (site / TOP).mkdir()
    (site / TOP / "__init__.py").write_bytes(b"")  # renamed into place, tarball not deleted
    assert rocm_sdk.devel_status().state == "not-expanded"


def test_lost_tarball_needs_a_reinstall(site: Path) -> None:
    import rocm_sdk

    (site / "rocm_sdk_devel" / "_devel.tar").unlink()
    status = rocm_sdk.devel_status()
    assert status.state == "incomplete" and status.fix.startswith("pip install --force-reinstall")


def test_package_installed_after_expansion_needs_init(site: Path) -> None:
    import rocm_sdk
    from rocm_sdk._devel import get_devel_root

    root = get_devel_root()
    assert rocm_sdk.is_devel_expanded()  # a link into a package not installed is pending
    dist_info = fake_install(site, "rocm-profiler", VERSION, {f"{PROFILER}/bin/rocprofv3": b"prof"})
    status = rocm_sdk.devel_status()
    assert (status.state, status.fix) == ("incomplete", "rocm-sdk init")
    assert "1 of its links into other packages" in status.reason
    get_devel_root()
    assert rocm_sdk.is_devel_expanded() and (root / "bin" / "rocprofv3").is_file()
    # removed by other means than pip (which removes the link: its RECORD lists it)
    shutil.rmtree(site / PROFILER)
    shutil.rmtree(dist_info)
    assert rocm_sdk.devel_status().state == "incomplete"
    get_devel_root()
    assert rocm_sdk.is_devel_expanded() and not os.path.lexists(root / "bin" / "rocprofv3")


def test_device_package_installed_after_expansion_needs_init(site: Path) -> None:
    import rocm_sdk
    from rocm_sdk._devel import get_devel_root

    get_devel_root()
    install_device(site, "gfx942")
    status = rocm_sdk.devel_status()
    assert (status.state, status.fix) == ("incomplete", "rocm-sdk init")
    assert "rocm-sdk-device-gfx942" in status.reason
    get_devel_root()
    assert rocm_sdk.is_devel_expanded()


def test_devel_not_installed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    rocm_sdk_tree(CTX, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    with importable(site):
        import rocm_sdk

        status = rocm_sdk.devel_status()
        assert (status.state, status.root, status.fix) == (
            "not-installed",
            None,
            "pip install 'rocm[devel]'",
        )
        assert not rocm_sdk.is_devel_expanded()
    run = check_cli(site)
    assert run.returncode == 1
    assert run.stderr == (
        "rocm-sdk: rocm-sdk-devel is not installed; fix: pip install 'rocm[devel]'\n"
    )
