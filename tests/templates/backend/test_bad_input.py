"""Bad input of the rocm sdist's build backend: one ``error:`` line (what pip and uv show),
exit status 1, nothing written; offload-arch output is parsed in linear time and capped."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.templates.backend.test_hooks import CALL_HOOK, build
from tests.templates.dist_info.test_dist_info import (
    clean_env,
    fake_offload_arch,
    load,
    use_offload_arch,
)
from tests.templates.tpl_kit import rocm_sdk_tree, sdist_bytes
from tests.templates.tpl_rendering import SAMPLE_CONTEXTS, context

__all__ = ["clean_env"]  # a fixture used below

HOOKS = ("prepare_metadata_for_build_wheel", "build_wheel")
BAD_FAMILIES = {
    "typo": "gfx94X-dcgpux",
    "list": "gfx94X-dcgpu;gfx110X-all",
    "path": "../../gfx94X-dcgpu",
    "newline": "gfx94X-dcgpu\nerror: injected",
    "huge": "gfx1250-strict" * 9000,  # 126 KB: about the most one variable can hold
}


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def run_hook(
    tree: Path,
    hook: str,
    out: Path,
    env_update: dict[str, str],
    preexec: Callable[[], object] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_SDK_")}
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    env.update(env_update)
    return subprocess.run(
        [sys.executable, "-c", CALL_HOOK, hook, str(out)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=preexec,
        check=False,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a hook that failed cleanly (exit 1, no traceback)."""
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    return lines[0]


def fails_cleanly(
    tmp_path: Path, hook: str, env: dict[str, str], preexec: Callable[[], object] | None = None
) -> str:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    before = snapshot(tree)
    out = tmp_path / "out"
    line = one_error_line(run_hook(tree, hook, out, env, preexec))
    assert snapshot(tree) == before
    assert not out.exists() or list(out.iterdir()) == []
    assert {p.name for p in tmp_path.iterdir()} <= {"rocm", "out"}
    return line


# --- ROCM_SDK_TARGET_FAMILY -----------------------------------------------------------------


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("case", sorted(BAD_FAMILIES))
def test_unknown_target_family_is_one_line(tmp_path: Path, hook: str, case: str) -> None:
    value = BAD_FAMILIES[case]
    line = fails_cleanly(tmp_path, hook, {"ROCM_SDK_TARGET_FAMILY": value})
    shown = repr(value.strip()[:60])
    assert line.startswith(f"error: ROCM_SDK_TARGET_FAMILY={shown}"), line
    assert "is not a target family of this ROCm 7.1.0 build; offered: gfx94X-dcgpu;" in line
    assert len(line) < 400
    if case == "huge":
        assert f"... ({len(value)} characters)" in line


def test_a_good_family_still_builds_the_same_wheel(tmp_path: Path) -> None:
    first, _ = build(tmp_path / "a", SAMPLE_CONTEXTS["legacy2"], family="gfx120X-all")
    second, members = build(tmp_path / "b", SAMPLE_CONTEXTS["legacy2"], family=" gfx120X-all ")
    assert first.read_bytes() == second.read_bytes()
    assert b"rocm-sdk-libraries-gfx120X-all==7.1.0" in members["rocm-7.1.0.dist-info/METADATA"]


# --- SOURCE_DATE_EPOCH ----------------------------------------------------------------------


@pytest.mark.parametrize("hook", [*HOOKS, "build_sdist"])
@pytest.mark.parametrize("epoch", ["4354819200", "99999999999999", "1700000000000"])
def test_epoch_after_2106_is_one_line(tmp_path: Path, hook: str, epoch: str) -> None:
    line = fails_cleanly(
        tmp_path, hook, {"SOURCE_DATE_EPOCH": epoch, "ROCM_SDK_TARGET_FAMILY": "gfx94X-dcgpu"}
    )
    assert line == (
        f"error: SOURCE_DATE_EPOCH='{epoch}' is after 2106-02-07T06:28:15Z "
        "(4294967295), the latest time a gzip header can hold (a time in "
        "milliseconds?)"
    )


@pytest.mark.parametrize("epoch", ["soon", "1.5e9", "17000\n00000", "9" * 5000])
def test_epoch_not_an_integer_is_one_line(tmp_path: Path, epoch: str) -> None:
    line = fails_cleanly(tmp_path, "build_wheel", {"SOURCE_DATE_EPOCH": epoch})
    assert line.startswith(f"error: SOURCE_DATE_EPOCH={epoch[:30]!r}"), line
    assert line.endswith("is not an integer (seconds since 1970)") and len(line) < 200


@pytest.mark.parametrize(
    ("epoch", "stamp"),
    [
        ("-1", (1980, 1, 1, 0, 0, 0)),  # clamped to the ZIP minimum, as the builder does
        ("0", (1980, 1, 1, 0, 0, 0)),
        ("", (1980, 1, 1, 0, 0, 0)),
        (" 1700000000 ", (2023, 11, 14, 22, 13, 20)),
        ("4294967295", (2106, 2, 7, 6, 28, 14)),  # the latest one; ZIP keeps even seconds
    ],
)
def test_epochs_an_archive_can_hold_are_used(
    tmp_path: Path, epoch: str, stamp: tuple[int, ...]
) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    proc = run_hook(tree, "build_wheel", tmp_path / "out", {"SOURCE_DATE_EPOCH": epoch})
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(next((tmp_path / "out").glob("*.whl"))) as zf:
        assert {i.date_time for i in zf.infolist()} == {stamp}


# --- the machine fails ----------------------------------------------------------------------


def _limit_file_size() -> None:
    # Every write past 8 KiB fails with EFBIG, as a full disk fails with ENOSPC.
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 10, 8 << 10))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


@pytest.mark.parametrize("hook", ["build_wheel", "build_sdist"])
def test_a_failing_write_is_one_line_naming_the_archive(tmp_path: Path, hook: str) -> None:
    line = fails_cleanly(
        tmp_path, hook, {"ROCM_SDK_TARGET_FAMILY": "gfx94X-dcgpu"}, preexec=_limit_file_size
    )
    name = "rocm-7.1.0-py3-none-any.whl" if hook == "build_wheel" else "rocm-7.1.0.tar.gz"
    assert line == f"error: {tmp_path / 'out' / name}: File too large"


def test_an_unwritable_wheel_directory_is_one_line(tmp_path: Path) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    (tmp_path / "out").write_text("a file")
    line = one_error_line(
        run_hook(tree, "build_wheel", tmp_path / "out", {"ROCM_SDK_TARGET_FAMILY": "gfx94X-dcgpu"})
    )
    assert line == f"error: {tmp_path / 'out'}: File exists"
    assert (tmp_path / "out").read_text() == "a file"


# --- offload-arch ---------------------------------------------------------------------------


def test_offload_arch_lines_are_deduplicated_in_linear_time(tmp_path: Path) -> None:
    di = load(tmp_path, SAMPLE_CONTEXTS["kpack"])
    lines = b"".join(b"gfx%d\r\n" % (i % 50_000) for i in range(100_000)) + b"gfx942\n"
    start = time.monotonic()
    arches = di.parse_offload_arch(lines)
    assert time.monotonic() - start < 5  # 144 s when each line was looked up in a list
    assert len(arches) == 50_000 and arches[:2] == ["gfx0", "gfx1"] and "gfx942" in arches


def test_offload_arch_output_past_the_cap_is_ignored_with_a_warning(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    body = 'echo gfx942; i=0; while [ $i -lt 20000 ]; do echo "gfx1100 $i"; i=$((i+1)); done\n'
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", body))
    start = time.monotonic()
    assert di.query_offload_arch() == []
    assert time.monotonic() - start < 30
    assert capfd.readouterr().err == (
        "rocm_sdk: warning: offload-arch printed more than 65536 bytes, which is no GPU list; "
        "ignoring it (set ROCM_SDK_TARGET_FAMILY to choose)\n"
    )
    assert di.resolve_target_family() == ("gfx1201", "default")  # not gfx942, its first line


def test_endless_offload_arch_output_is_cut_at_the_cap(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", "exec yes gfx942\n"))
    start = time.monotonic()
    assert di.query_offload_arch() == []
    assert time.monotonic() - start < 30  # killed at the cap, not at the 60 s timeout
    assert "printed more than 65536 bytes" in capfd.readouterr().err


def test_offload_arch_output_within_the_cap_is_used(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    body = "i=0; while [ $i -lt 3000 ]; do echo gfx90a; i=$((i+1)); done; echo gfx1201\n"
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", body))
    assert di.query_offload_arch() == ["gfx90a", "gfx1201"]
    assert di.resolve_target_family() == ("gfx1201", "discovered")
    assert capfd.readouterr().err == ""


def test_the_backend_survives_a_flooding_offload_arch(tmp_path: Path) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["kpack"], tmp_path / "rocm")
    bindir = fake_offload_arch(tmp_path / "bin", "exec yes gfx942\n")
    proc = run_hook(
        tree,
        "build_wheel",
        tmp_path / "out",
        {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "rocm_sdk: warning: offload-arch printed more than 65536 bytes" in proc.stderr
    assert "no GPU target was detected" in proc.stderr


# --- through the real frontends ---------------------------------------------------------------


def _frontend_dist(tmp_path: Path) -> Path:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "src")
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "rocm-7.1.0.tar.gz").write_bytes(sdist_bytes(tree, "rocm-7.1.0"))
    return dist


def _frontend_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ROCM_SDK_", "PIP_", "UV_", "VIRTUAL_ENV", "SOURCE_DATE"))
    }
    env.update(UV_NO_CACHE="1", PIP_NO_CACHE_DIR="1", HOME=str(tmp_path / "home"), **extra)
    return env


FRONTEND_CASES = {
    "family": (
        {"ROCM_SDK_TARGET_FAMILY": "gfx94X-dcgpu;../x\nnext"},
        "error: ROCM_SDK_TARGET_FAMILY='gfx94X-dcgpu;../x\\nnext' is not a target family",
    ),
    "epoch": (
        {"SOURCE_DATE_EPOCH": "4354819200", "ROCM_SDK_TARGET_FAMILY": "gfx94X-dcgpu"},
        "error: SOURCE_DATE_EPOCH='4354819200' is after 2106-02-07T06:28:15Z",
    ),
}


def _assert_frontend_shows_one_line(
    proc: subprocess.CompletedProcess[str], expected: str, target: Path
) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    ours = [
        line.strip()
        for line in output.splitlines()
        if "error: " in line and ("ROCM_SDK" in line or "SOURCE_DATE_EPOCH" in line)
    ]
    assert len(ours) == 1 and ours[0].startswith(expected), output
    assert "Traceback" not in output and 'File "' not in output, output
    # nothing is installed (uv keeps its own lock file in the target)
    assert not target.exists() or [p.name for p in target.iterdir()] in ([], [".lock"])


@pytest.mark.parametrize("case", sorted(FRONTEND_CASES))
def test_pip_shows_the_one_line(tmp_path: Path, case: str) -> None:
    env_update, expected = FRONTEND_CASES[case]
    dist, target = _frontend_dist(tmp_path), tmp_path / "target"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(dist),
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
            str(target),
            "rocm",
        ],
        env=_frontend_env(tmp_path, **env_update),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    _assert_frontend_shows_one_line(proc, expected, target)
    assert "[1 lines of output]" in proc.stdout + proc.stderr


@pytest.mark.parametrize("case", sorted(FRONTEND_CASES))
def test_uv_shows_the_one_line(tmp_path: Path, case: str) -> None:
    uv = Path(sys.executable).parent / "uv"
    if not uv.is_file():
        pytest.skip("uv is not installed in this environment")
    env_update, expected = FRONTEND_CASES[case]
    dist, target = _frontend_dist(tmp_path), tmp_path / "target"
    proc = subprocess.run(
        [
            str(uv),
            "pip",
            "install",
            "--python",
            sys.executable,
            "--offline",
            "--no-index",
            "--find-links",
            str(dist),
            "--no-deps",
            "--target",
            str(target),
            "rocm",
        ],
        env=_frontend_env(tmp_path, **env_update),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    _assert_frontend_shows_one_line(proc, expected, target)


@pytest.mark.parametrize(
    ("hook", "name"),
    [("build_wheel", "rocm-7.1.0-py3-none-any.whl"), ("build_sdist", "rocm-7.1.0.tar.gz")],
)
def test_a_leftover_partial_symlink_is_never_written_through(
    tmp_path: Path, hook: str, name: str
) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not yours")
    out = tmp_path / "out"
    out.mkdir()
    (out / f".{name}.partial").symlink_to(elsewhere)
    proc = run_hook(tree, hook, out, {"ROCM_SDK_TARGET_FAMILY": "gfx94X-dcgpu"})
    assert proc.returncode == 0, proc.stderr
    assert elsewhere.read_text() == "not yours"
    assert sorted(p.name for p in out.iterdir()) == [name]
