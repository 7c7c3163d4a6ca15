"""TheRock's release promotion (``build_tools/packaging/promote_packages.py``, vendored
unchanged in tests/third_party/therock) run as a release engineer runs it, on the kpack-split
set our builder writes from the real sample tree.

What it must do on our set is what it does on TheRock's: promote every wheel and the ``rocm``
sdist (``7.99.0rc1`` -> ``7.99.0`` in the file names, METADATA, both PKG-INFO files,
``src/rocm.egg-info/requires.txt`` and every ``_dist_info.py``), and with
``--multi-arch-targets`` keep only the named GPUs: the other device wheels skipped, their
extras gone from requires.txt and PKG-INFO, their families gone from ``_dist_info.py`` —
so that the sdist, built on a user's machine, offers exactly the kept GPUs. The oracle for
the rewritten requires.txt and PKG-INFO is our builder's own egg-info for a set built with
the kept families only: the same files a fresh build of that set would have.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

from build_tools.plan._context import TemplateContext
from build_tools.plan._egg_info import default_requirements, requires_txt

from ..conftest import require

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

PROMOTE = (
    Path(__file__).resolve().parents[1]
    / "third_party/therock/build_tools/packaging/promote_packages.py"
)
RC, RELEASE = "7.99.0rc1", "7.99.0"
TARGETS = ("gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a")
KEEP = ("gfx90a", "gfx1030")


@pytest.fixture(scope="module")
def rc_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kpack-split set of the sample tree, version 7.99.0rc1."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from build_tools.build_python_packages import main
    from sample_tree.make_sample_tree import make_sample_tree

    tree = make_sample_tree(
        tmp_path_factory.mktemp("promote") / "artifacts",
        cache_dir=None,
        family="gfx90a-dcgpu",
        kpack_split=True,
    )
    out = tmp_path_factory.mktemp("promote-out")
    assert main(["--artifact-dir", str(tree), "--dest-dir", str(out), "--version", RC]) == 0
    return out / "dist"


#: TheRock's script calls ``TarFile.extractall(..., filter="data")``, which needs Python
#: 3.11.4 or later; on an older 3.11 (Debian bookworm's 3.11.2) the script runs with a shim
#: that drops the keyword (the archives are the ones this test just built).
_RUN_PROMOTE = """
import runpy, sys, tarfile
if not hasattr(tarfile, "data_filter"):
    _extractall = tarfile.TarFile.extractall
    def extractall(self, *args, filter=None, **kwargs):
        return _extractall(self, *args, **kwargs)
    tarfile.TarFile.extractall = extractall
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def promote(dist: Path, into: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shutil.copytree(dist, into)
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_PROMOTE, str(PROMOTE), f"--input-dir={into}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "[ERROR]" not in proc.stdout
    return proc


def sdist_members(sdist: Path) -> dict[str, str]:
    """Text members of the sdist, by path below its top directory."""
    with tarfile.open(sdist) as tar:
        return {
            m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile() and m.name.endswith((".txt", ".py", "PKG-INFO"))
        }


def backend_metadata(sdist: Path, where: Path, family: str) -> str:
    """The METADATA our backend gives when pip builds ``sdist`` for ``family``."""
    with tarfile.open(sdist) as tar:
        # our own sdist; the "data" filter where this Python has it (3.11.4 and later)
        tar.extractall(where, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (root,) = where.iterdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_SDK_", "ROCM_BOOT"))}
    env["ROCM_SDK_TARGET_FAMILY"] = family
    code = "import sys; sys.path.insert(0, '_backend'); import rocm_sdk_backend as b; "
    proc = subprocess.run(
        [sys.executable, "-c", code + "print(b.metadata_text(), end='')"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def families_of(dist_info_py: str) -> list[str]:
    return re.findall(r"^AVAILABLE_TARGET_FAMILIES\.append\('([^']+)'\)$", dist_info_py, re.M)


def requirement_lines(pkg_info: str) -> list[str]:
    msg = HeaderParser().parsestr(pkg_info)
    return sorted(msg.get_all("Requires-Dist") or []) + sorted(msg.get_all("Provides-Extra") or [])


def test_the_sdist_carries_setuptools_egg_info(rc_dist: Path) -> None:
    """The files promote_packages.py reads, consistent with each other and with what our
    backend resolves for the build's default family."""
    files = sdist_members(rc_dist / f"rocm-{RC}.tar.gz")
    egg = "src/rocm.egg-info"
    assert files[f"{egg}/PKG-INFO"] == files["PKG-INFO"]
    assert files[f"{egg}/top_level.txt"] == "rocm_sdk\n"
    assert files[f"{egg}/dependency_links.txt"] == "\n"
    assert "rocm-sdk = rocm_sdk.__main__:main" in files[f"{egg}/entry_points.txt"]
    sources = files[f"{egg}/SOURCES.txt"].splitlines()
    assert sources == sorted(sources) and f"{egg}/requires.txt" in sources
    assert "src/rocm_sdk/_dist_info.py" in sources and "pyproject.toml" in sources
    requires = files[f"{egg}/requires.txt"]
    assert requires.startswith(f"rocm-sdk-core=={RC}\n\n[devel]\n")
    assert f"[device]\nrocm-sdk-device-gfx1030=={RC}\n" in requires  # the default family
    assert families_of(files["src/rocm_sdk/_dist_info.py"]) == sorted(TARGETS)


def test_the_egg_info_agrees_with_the_backend(rc_dist: Path, tmp_path: Path) -> None:
    files = sdist_members(rc_dist / f"rocm-{RC}.tar.gz")
    built = backend_metadata(rc_dist / f"rocm-{RC}.tar.gz", tmp_path, "gfx1030")
    assert requirement_lines(built) == requirement_lines(files["PKG-INFO"])


def test_promote_rc_to_release(rc_dist: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    promote(rc_dist, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [p.name for p in rc_dist.iterdir()]
        + [p.name.replace(RC, RELEASE) for p in rc_dist.iterdir()]
    )
    files = sdist_members(out / f"rocm-{RELEASE}.tar.gz")
    for name in (
        "PKG-INFO",
        "src/rocm.egg-info/PKG-INFO",
        "src/rocm.egg-info/requires.txt",
        "src/rocm_sdk/_dist_info.py",
    ):
        assert RC not in files[name] and RELEASE in files[name], name
    built = backend_metadata(out / f"rocm-{RELEASE}.tar.gz", tmp_path / "b", "gfx90a")
    assert f"Version: {RELEASE}\n" in built and RC not in built
    for wheel in out.glob(f"*-{RELEASE}-*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            texts = {
                n: zf.read(n).decode()
                for n in zf.namelist()
                if n.endswith(("METADATA", "_dist_info.py"))
            }
        assert texts and all(RC not in t for t in texts.values()), wheel.name


def test_keep_list_keeps_only_the_named_gpus(rc_dist: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    keep = ",".join(KEEP)
    proc = promote(rc_dist, out, "--skip-version-promotion", f"--multi-arch-targets={keep}")
    assert "single-arch requires.txt" not in proc.stdout  # the keep list acted on our files
    dropped = sorted(set(TARGETS) - set(KEEP))
    for target in dropped:
        assert f"Skipping per-gfx wheel for non-kept arch: rocm_sdk_device_{target}-" in proc.stdout
    sdist = out / f"rocm-{RC}.tar.gz"
    files = sdist_members(sdist)
    assert families_of(files["src/rocm_sdk/_dist_info.py"]) == sorted(KEEP)
    for logical in ("core", "devel", "libraries"):
        wheel = out / f"rocm_sdk_{logical}-{RC}-py3-none-linux_x86_64.whl"
        with zipfile.ZipFile(wheel) as zf:
            (name,) = [n for n in zf.namelist() if n.endswith("/_dist_info.py")]
            assert families_of(zf.read(name).decode()) == sorted(KEEP), wheel.name

    # The oracle: what our builder writes for the same set built with the kept GPUs only.
    ctx = kept_context(files["src/rocm_sdk/_dist_info.py"])
    assert (
        files["src/rocm.egg-info/requires.txt"] == requires_txt(default_requirements(ctx)).decode()
    )
    for pkg_info in ("PKG-INFO", "src/rocm.egg-info/PKG-INFO"):
        assert not any(t in files[pkg_info] for t in dropped), pkg_info

    # And the sdist, built on a user's machine, offers exactly the kept GPUs.
    built = backend_metadata(sdist, tmp_path / "b", "gfx90a")
    extras = HeaderParser().parsestr(built).get_all("Provides-Extra")
    assert sorted(e for e in extras if e.startswith("device")) == [
        "device",
        "device-all",
        "device-gfx1030",
        "device-gfx90a",
    ]


def kept_context(dist_info_py: str) -> TemplateContext:
    """The template context of a set with only the kept families (from the promoted sdist's
    own _dist_info.py values)."""
    packages = []
    for m in re.finditer(
        r"logical_name='([^']+)',\s*dist_template='([^']+)',\s*pure_template=[^,]+,\s*"
        r"required=(True|False),\s*target_specific=(True|False)",
        dist_info_py,
    ):
        packages.append(
            {
                "logical_name": m[1],
                "dist_template": m[2],
                "required": m[3] == "True",
                "target_specific": m[4] == "True",
            }
        )
    assert packages
    base = TemplateContext(
        version=RC,
        nonce="",
        kpack_mode=True,
        default_target_family="gfx1030",
        available_target_families=KEEP,
        linux_target_families=KEEP,
        windows_target_families=(),
        packages=tuple(packages),
        libraries=(),
        scripts=(),
        generic_targets={},
    )
    return base
