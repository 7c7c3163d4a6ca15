"""Stand-in for TheRock's ``build_tools/fetch_artifacts.py``: the same command line, the
same selection (every archive of the run that ``--artifact-group``/``--amdgpu-targets`` and
the include/exclude regular expressions select, ``re.search`` on the file name), served
from the local bucket ``$STAND_IN_BUCKET/<run-id>-<platform>/`` instead of S3. Only
``--no-extract`` is served (the workflow hands archives to the builder as they are)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

ARCHIVE = (".tar.zst", ".tar.xz")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fetch_artifacts")
    p.add_argument("include", nargs="*")
    p.add_argument("--exclude", nargs="*")
    p.add_argument("--platform", choices=["linux", "windows"], default="linux")
    p.add_argument("--artifact-group")
    p.add_argument("--amdgpu-targets", default="")
    p.add_argument("--download-concurrency", type=int, default=10)
    p.add_argument("--extract-concurrency", type=int)
    p.add_argument("--run-github-repo")
    p.add_argument("--run-id", required=True)
    p.add_argument("--output-dir", type=Path, default="build/artifacts")
    p.add_argument("--dry-run", default=False, action=argparse.BooleanOptionalAction)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--no-extract", action="store_true")
    mode.add_argument("--extract", action="store_true")
    mode.add_argument("--flatten", action="store_true")
    p.add_argument("--delete-after-extract", default=True, action=argparse.BooleanOptionalAction)
    return p


def _selected(name: str, includes: list[str], excludes: list[str]) -> bool:
    if includes and not any(re.search(p, name) for p in includes):
        return False
    return not any(re.search(p, name) for p in excludes)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if not args.no_extract:
        sys.exit("stand-in: only --no-extract is served")
    if args.artifact_group or args.amdgpu_targets:
        sys.exit("stand-in: --artifact-group/--amdgpu-targets are not served")
    run = Path(os.environ["STAND_IN_BUCKET"]) / f"{args.run_id}-{args.platform}"
    available = sorted(p.name for p in run.iterdir() if p.name.endswith(ARCHIVE))
    chosen = [n for n in available if _selected(n, args.include, args.exclude or [])]
    if not chosen:
        print(f"Filtering artifacts for {args.run_id} resulted in an empty set. Exiting...")
        return 1
    if args.dry_run:
        return 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name in chosen:
        shutil.copyfile(run / name, args.output_dir / name)
    with open(os.environ["STAND_IN_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": "fetch_artifacts", "run": args.run_id, "got": chosen}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
