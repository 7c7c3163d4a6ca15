"""Real ROCm 7 wheels from PyPI: compressed CCOB v3 bundles with LLVM generic targets.

Every code object our engine extracts or archives is compared with an independent decode
of the ``.hip_fatbin`` section written here from the spec (pyelftools for the section,
``zstandard`` for the payload, ``struct`` for the bundle), and every host binary we
rewrite with ``readelf``.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest
import zstandard
from elftools.elf.elffile import ELFFile
from packaging.requirements import Requirement

import kpack.wheelsplit as spw
from kpack.archive import compressor
from kpack.archive._write import compress_frame
from kpack.bundle import _ccob as _bundle_ccob
from kpack.resolve import read_kpack_ref, resolve_binary
from kpack.split._jobs import FatJob, run_fat_job
from kpack.transform import extract_kernels, transform_binary
from tests.kpack.bundle_fixtures import read_kpack_by_spec
from tests.pypi_inputs import (
    JAX_PJRT,
    JAX_PLUGIN,
    Digests,
    fat_members,
    independent_code_objects,
    pypi_wheel,
)

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    wheel = pypi_wheel(JAX_PLUGIN)
    return wheel, fat_members(wheel, tmp_path_factory.mktemp("plugin"))


def test_the_plugin_carries_modern_bundles(plugin: tuple[Path, list[Path]]) -> None:
    _, fat = plugin
    assert len(fat) >= 3
    targets = {t for so in fat for t, _ in independent_code_objects(so)}
    assert {"gfx9-4-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"} <= targets
    assert {"gfx908", "gfx90a"} <= targets


def test_extracted_code_objects_match_an_independent_decode(
    plugin: tuple[Path, list[Path]],
) -> None:
    for so in plugin[1]:
        ours: Digests = collections.Counter(
            (k.target, hashlib.sha256(k.read()).hexdigest()) for k in extract_kernels(so)
        )
        assert ours == independent_code_objects(so), so.name


def test_transformed_hosts_are_valid_and_carry_no_device_code(
    plugin: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    for so in plugin[1]:
        dest = tmp_path / so.name
        plan = transform_binary(so, dest, kernel_name=so.name, search_paths=["x_@GFXARCH@.kpack"])
        assert plan.removed_bytes > 0 or so.stat().st_size < 1 << 20
        proc = subprocess.run(
            ["readelf", "-lSdW", str(dest)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0 and not proc.stderr, proc.stderr
        with dest.open("rb") as f:
            fatbin = ELFFile(f).get_section_by_name(".hip_fatbin")
            assert fatbin["sh_type"] == "SHT_NOBITS"
        ref = read_kpack_ref(dest)
        assert ref is not None and ref.kernel_name == so.name


def _split(wheel: Path, out: Path, root: str, jobs: int = 2) -> spw.SplitReport:
    options = spw.SplitOptions(root, "amd-device", (), jobs=jobs)
    return spw.split_wheel(wheel, out, options)


def test_the_split_does_not_depend_on_the_number_of_threads(
    plugin: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """Frames compressed on worker threads land in the spool in any order; the archives
    and every wheel are byte-identical to a one-thread split's."""
    wheel, _ = plugin
    outs = {jobs: tmp_path / f"j{jobs}" for jobs in (1, 2)}
    for jobs, out in outs.items():
        _split(wheel, out, JAX_PLUGIN.overlay_root, jobs=jobs)
    names = sorted(p.name for p in outs[1].glob("*.whl"))
    assert names and names == sorted(p.name for p in outs[2].glob("*.whl"))
    for name in names:
        assert (outs[1] / name).read_bytes() == (outs[2] / name).read_bytes(), name


def _archived(out: Path, tree: Path) -> Digests:
    found: Digests = collections.Counter()
    for whl in sorted(out.glob("*.whl")):
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(tree)
    for archive in (p for p in tree.rglob("*.kpack") if p.is_file()):
        _, kernels = read_kpack_by_spec(archive.read_bytes())
        for (_key, target), data in kernels.items():
            found[(target, hashlib.sha256(data).hexdigest())] += 1
    return found


def test_the_wheel_splitter_archives_every_code_object(
    plugin: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    wheel, fat = plugin
    out, tree = tmp_path / "out", tmp_path / "tree"
    _split(wheel, out, JAX_PLUGIN.overlay_root)
    expected: Digests = sum((independent_code_objects(so) for so in fat), collections.Counter())
    assert _archived(out, tree) == expected
    names = {p.name.split("-")[0] for p in out.glob("*.whl")}
    assert "amd_device_gfx9_4_generic" in names and "amd_device_gfx90a" in names
    for so in fat:  # the host copy in the split tree: every wrapper resolves, ISA or generic
        host = tree / so.relative_to(so.parents[1])
        for arches in (
            ["gfx90a"],
            ["gfx908"],
            ["gfx942", "gfx9-4-generic"],
            ["gfx1100", "gfx11-generic"],
        ):
            assert not resolve_binary(host, arches, env={}).missing, (host.name, arches)


@pytest.mark.large
def test_the_pjrt_wheel_splits_in_flat_memory(tmp_path: Path) -> None:
    """520 MB library, 41 CCOB v3 bundles: split in a child process whose peak RSS stays
    under 400 MB (the whole decoded device code never sits in memory), every code object
    archived byte-identical, every wrapper resolved."""
    if os.environ.get("ROCM_PACKAGING_LARGE") != "1":
        pytest.skip("opt-in: set ROCM_PACKAGING_LARGE=1")
    wheel = pypi_wheel(JAX_PJRT)
    out = tmp_path / "out"
    code = (
        "import json, resource, sys\n"
        "from pathlib import Path\n"
        "import kpack.wheelsplit as spw\n"
        "options = spw.SplitOptions(sys.argv[3], 'amd-device', (), jobs=2)\n"
        "spw.split_wheel(Path(sys.argv[1]), Path(sys.argv[2]), options)\n"
        # VmHWM: this process's own peak (ru_maxrss would carry over the forking parent's)
        "status = open('/proc/self/status').read().splitlines()\n"
        "hwm = next(int(x.split()[1]) for x in status if x.startswith('VmHWM'))\n"
        "rss = max(hwm, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(json.dumps({'rss': rss * 1024}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(wheel), str(out), JAX_PJRT.overlay_root],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rss = json.loads(proc.stdout.strip().splitlines()[-1])["rss"]
    assert rss < 400e6, rss
    tree = tmp_path / "tree"
    fat = fat_members(wheel, tmp_path / "input")
    expected: Digests = sum((independent_code_objects(so) for so in fat), collections.Counter())
    assert sum(expected.values()) == 246
    assert _archived(out, tree) == expected
    host = tree / "jax_plugins/xla_rocm7/xla_rocm_plugin.so"
    assert not resolve_binary(host, ["gfx90a"], env={}).missing


def _extra_wheels(wheel: Path, extra: str) -> list[str]:
    """Device distributions the host wheel's METADATA requires for ``extra`` (what pip
    resolves for ``host[extra]``)."""
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
    found = []
    for value in Parser().parsestr(text.decode()).get_all("Requires-Dist") or []:
        req = Requirement(value)
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            found.append(req.name)
    return sorted(found)


def test_a_gfx942_user_installs_the_generic_code_and_every_kernel_resolves(
    plugin: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """The plugin has no gfx942 code, only gfx9-4-generic: ``[device-gfx942]`` must pull
    that wheel (LLVM's gfx9-4-generic serves gfx942), and the installed host libraries must
    resolve every wrapper for a gfx942 agent the way the runtime looks it up."""
    wheel, fat = plugin
    out = tmp_path / "out"
    report = _split(wheel, out, JAX_PLUGIN.overlay_root)
    host = out / report.host_wheel
    assert _extra_wheels(host, "device-gfx942") == ["amd-device-gfx9-4-generic"]
    assert _extra_wheels(host, "device-gfx1151") == ["amd-device-gfx11-generic"]
    assert _extra_wheels(host, "device-gfx90a") == ["amd-device-gfx90a"]
    assert _extra_wheels(host, "device-gfx9-4-generic") == ["amd-device-gfx9-4-generic"]
    gpus = {g.target: g for g in report.gpus}
    assert any("gfx9_4_generic" in f for f in gpus["gfx942"].wheels)
    assert gpus["gfx950"].download == gpus["gfx942"].download
    # pip install the host and what the extra names (--no-deps: jax itself is not under test)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    device = [next(out.glob("amd_device_gfx9_4_generic-*.whl"))]
    proc = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--no-index", "--no-deps", str(host), *map(str, device)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = next(venv.glob("lib/python*/site-packages"))
    checked = 0
    for so in fat:
        installed = site / so.relative_to(so.parents[1])
        res = resolve_binary(installed, ["gfx942:sramecc+:xnack-"], env={})
        assert not res.missing, (installed.name, res.missing[:2])
        assert {lk.target for lk in res.lookups} == {"gfx9-4-generic"}
        checked += len(res.lookups)
        # what the venv does not have stays unresolved: the check can fail
        assert resolve_binary(installed, ["gfx1100"], env={}).missing
    assert checked >= 3


def test_the_variant_wheel_gives_generic_code_to_every_member_processor(
    plugin: tuple[Path, list[Path]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each processor the provider knows and a wheel serves gets a variant value, and its
    requirements carry its ISA's and its generic target's device wheels; no target is
    left out (every generic target serves processors rocm-bootstrap knows)."""
    wheel, _ = plugin
    options = spw.SplitOptions(JAX_PLUGIN.overlay_root, "amd-device", (), jobs=2, variant=True,
                               variant_label="rocm7")  # fmt: skip
    out = tmp_path / "out"
    with caplog.at_level("WARNING"):
        report = spw.split_wheel(wheel, out, options)
    assert "left out" not in caplog.text
    variant = next(out / n for n in report.variant_wheels if n.endswith("-rocm7.whl"))
    with zipfile.ZipFile(variant) as zf:
        names = zf.namelist()
        doc = json.loads(zf.read(next(n for n in names if n.endswith("variant.json"))))
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    values = doc["variants"]["rocm7"]["amd"]["gfx_arch"]
    assert {"gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1151",
            "gfx1201"} <= set(values)  # fmt: skip
    assert not any("generic" in v for v in values)
    gated = [r for r in Parser().parsestr(meta).get_all("Requires-Dist") or []
             if "variant_properties" in r]  # fmt: skip
    for_942 = sorted(r.split("==")[0] for r in gated if 'gfx_arch :: gfx942"' in r)
    assert for_942 == ["amd-device-gfx9-4-generic"]
    for_90a = sorted(r.split("==")[0] for r in gated if 'gfx_arch :: gfx90a"' in r)
    assert for_90a == ["amd-device-gfx90a"]


def test_gpu_targets_keep_the_generic_code_their_agents_run(
    plugin: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """``split-artifacts --gpu-targets gfx942`` keeps gfx9-4-generic kernels (the plugin has
    no gfx942 code; a gfx942 agent runs the generic's) and drops the rest."""
    from kpack.split import split_artifact

    _, fat = plugin
    art = tmp_path / "jax_lib_generic"
    stage = art / "jax/stage"
    (stage / "lib").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text("jax/stage\n")
    for so in fat:
        (stage / "lib" / so.name).write_bytes(so.read_bytes())
    out = tmp_path / "out"
    split_artifact(art, out, prefix="jax_lib", gpu_targets=["gfx942"])
    outputs = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))  # records
    assert outputs == ["jax_lib_generic", "jax_lib_gfx9-4-generic"], outputs
    archives = [p for p in (out / "jax_lib_gfx9-4-generic").rglob("*.kpack") if p.is_file()]
    _, kernels = read_kpack_by_spec(archives[0].read_bytes())
    expected = sum((independent_code_objects(so) for so in fat), collections.Counter())
    assert len(kernels) == sum(n for (t, _), n in expected.items() if t == "gfx9-4-generic")


@pytest.mark.parametrize("threads", [1, 2], ids=["one-thread", "frame-workers"])
@pytest.mark.parametrize("level", [None, 3], ids=["raw", "frames"])
@pytest.mark.parametrize("keep_views", [True, False], ids=["in-process", "worker"])
def test_each_compressed_bundle_is_decoded_once_while_splitting(
    plugin: tuple[Path, list[Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    keep_views: bool, level: int | None, threads: int,
) -> None:  # fmt: skip
    """The transform's full check decodes every CCOB bundle; the kernels are spooled from
    that same decode, not from a second one, and come out byte-identical (as themselves,
    or as zstd frames that decode to them; frames made on worker threads are the very
    frames one thread makes)."""
    decodes: collections.Counter[int] = collections.Counter()
    real = _bundle_ccob.Decoding.chunks

    def counting(self: _bundle_ccob.Decoding) -> Iterator[bytes]:
        decodes[self._data_start] += 1
        return real(self)

    monkeypatch.setattr(_bundle_ccob.Decoding, "chunks", counting)
    for number, so in enumerate(plugin[1]):
        decodes.clear()
        spool_path = tmp_path / f"{number}.spool"
        job = FatJob(
            stage="jax_plugin",
            kernel_name=so.name,
            source=so,
            size=so.stat().st_size,
            depth=0,
            search_path="x_@GFXARCH@.kpack",
            spool=spool_path,
            dest=tmp_path / f"{number}.so",
            level=level,
        )
        outcome = run_fat_job(job, keep_views=keep_views, threads=threads)
        assert decodes and set(decodes.values()) == {1}, (so.name, decodes)
        spool = spool_path.read_bytes()
        ours: Digests = collections.Counter()
        for k in outcome.kernels:
            data = bytes(k.view) if k.view is not None else spool[k.offset : k.offset + k.size]
            if k.level is not None and k.view is None:
                assert k.level == level and zstandard.frame_content_size(data) == k.original_size
                frame = data
                data = zstandard.ZstdDecompressor().decompress(data)
                assert frame == compress_frame(compressor(level), data)
            assert len(data) == k.original_size
            ours[(k.target, hashlib.sha256(data).hexdigest())] += 1
        if level is not None:  # the device code is not written out whole
            assert len(spool) * 2 < sum(k.original_size for k in outcome.kernels if k.view is None)
        assert ours == independent_code_objects(so), so.name
