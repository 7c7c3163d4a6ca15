"""Record, or check, the sha256 of every output of the project's main jobs.

    python -m tests.output_digests record FILE   # write the digests of this checkout's outputs
    python -m tests.output_digests check FILE    # exit 1 and name every output that differs

A structural change (modules moved, interfaces renamed) must not change a single output byte.
This runs the command lines users run, as subprocesses, on real inputs:

- the builder on the sample trees: legacy, kpack-split (fat artifacts split in-process), and a
  Windows tree (PE DLLs around real ROCm 7 bundles) in both modes;
- ``kpack split-artifacts`` on the kpack sample tree's fat artifacts (Debian's multi-arch
  ``librocrand`` and hipcc-built libraries);
- ``kpack split-wheel`` on the cached PyPI wheels (jax-rocm7-plugin, jax-rocm7-pjrt and the
  ``win_amd64`` bitsandbytes wheel).

Everything runs with one ``SOURCE_DATE_EPOCH``; the digests depend on the pinned compressors
and on the compilers of the machine (Debian bookworm's hipcc), so a digest file is compared on
the machine kind that wrote it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

EPOCH = "1700000000"
VERSION = "7.99.0.dev0"

Digests = dict[str, str]


def _run(*args: str | Path) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH}
    done = subprocess.run([str(a) for a in args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(map(str, args))}\n{done.stderr}")


#: the tools' output records (``.build-python-packages.json``, ``.kpack-split-<prefix>.json``)
#: hold each output's inode number, different in every run: digested with the inodes blanked
_RECORD = re.compile(r"\.(build-python-packages|kpack-split-.+)\.json")


def _without_inodes(value: object) -> object:
    if isinstance(value, dict):
        return {k: 0 if k == "inode" else _without_inodes(v) for k, v in value.items()}
    return value


def _content(path: Path) -> bytes:
    if not _RECORD.fullmatch(path.name) and path.parent.name != ".kpack-split-wheel":
        return path.read_bytes()
    record = _without_inodes(json.loads(path.read_text(encoding="utf-8")))
    return json.dumps(record, sort_keys=True).encode()


def _digests(root: Path) -> Digests:
    out: Digests = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[path.relative_to(root).as_posix()] = "-> " + os.readlink(path)
        elif path.is_file():
            out[path.relative_to(root).as_posix()] = hashlib.sha256(_content(path)).hexdigest()
    return out


def _build(tree: Path, dest: Path) -> Digests:
    script = REPO / "build_tools" / "build_python_packages.py"
    _run(sys.executable, script, "--artifact-dir", tree, "--dest-dir", dest,
         "--version", VERSION, "-q")  # fmt: skip
    return _digests(dest)


def _sample(work: Path, kpack_split: bool) -> Digests:
    from sample_tree.make_sample_tree import make_sample_tree

    tree = make_sample_tree(work / "tree", kpack_split=kpack_split)
    return _build(tree, work / "out")


def _windows(work: Path, kpack: bool) -> Digests:
    from tests.build_tools.windows_tree import write_windows_tree
    from tests.pypi_inputs import rocm7_bundles

    bundles = rocm7_bundles(work / "wheel")
    write_windows_tree(work / "tree", bundles, kpack=kpack, family="gfx110X-all")
    return _build(work / "tree", work / "out")


def _split_artifacts(work: Path) -> Digests:
    from sample_tree.make_sample_tree import make_sample_tree

    tree = make_sample_tree(work / "tree", kpack_split=True)
    out: Digests = {}
    for artifact in ("rand_lib_generic", "fft_lib_generic"):
        dest = work / artifact
        _run(sys.executable, "-m", "kpack", "split-artifacts", "--artifact-dir",
             tree / artifact, "--output-dir", dest)  # fmt: skip
        out.update({f"{artifact}/{k}": v for k, v in _digests(dest).items()})
    return out


def _split_wheel(name: str) -> Callable[[Path], Digests]:
    def run(work: Path) -> Digests:
        import tests.pypi_inputs as inputs

        wheel = getattr(inputs, name)
        _run(sys.executable, "-m", "kpack", "split-wheel", "--input", inputs.pypi_wheel(wheel),
             "--output-dir", work / "out", "--overlay-root", wheel.overlay_root,
             "--device-package-prefix", f"{wheel.project}-device")  # fmt: skip
        return _digests(work / "out")

    return run


CASES: dict[str, Callable[[Path], Digests]] = {
    "sample-legacy": lambda w: _sample(w, False),
    "sample-kpack": lambda w: _sample(w, True),
    "windows-legacy": lambda w: _windows(w, False),
    "windows-kpack": lambda w: _windows(w, True),
    "split-artifacts": _split_artifacts,
    "split-wheel-jax-plugin": _split_wheel("JAX_PLUGIN"),
    "split-wheel-jax-pjrt": _split_wheel("JAX_PJRT"),
    "split-wheel-bitsandbytes-win": _split_wheel("BITSANDBYTES_WIN"),
}


def record_all(only: list[str] | None = None) -> dict[str, Digests]:
    out: dict[str, Digests] = {}
    for name, case in CASES.items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory(prefix=f"digests-{name}-") as tmp:
            out[name] = case(Path(tmp))
        print(f"{name}: {len(out[name])} files", file=sys.stderr)
    return out


def _differences(want: dict[str, Digests], got: dict[str, Digests]) -> list[str]:
    problems = []
    for case, files in sorted(want.items()):
        have = got.get(case, {})
        for rel in sorted(set(files) | set(have)):
            if files.get(rel) != have.get(rel):
                problems.append(f"{case}: {rel}: {files.get(rel)} -> {have.get(rel)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("record", "check"))
    parser.add_argument("file", type=Path)
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these")
    args = parser.parse_args(argv)
    got = record_all(args.case)
    if args.action == "record":
        args.file.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    want = json.loads(args.file.read_text(encoding="utf-8"))
    if args.case:
        want = {k: v for k, v in want.items() if k in args.case}
    problems = _differences(want, got)
    for line in problems:
        print(line)
    print(f"{sum(map(len, got.values()))} outputs compared, {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
