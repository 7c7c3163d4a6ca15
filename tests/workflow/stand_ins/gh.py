"""Stand-in for the GitHub CLI as the workflow uses it, serving a run's artifacts from
``$STAND_IN_ARTIFACTS/<run-id>/<artifact name>`` (one file each, as a per-archive upload
holds): ``gh api --paginate repos/R/actions/runs/ID/artifacts --jq EXPR`` prints what that
``--jq`` expression makes of the API's answer (only the expression the workflow uses is
known here: another one is an error, so a change to it is seen), and ``gh run download ID
--repo R --name NAME --dir DIR`` puts the artifact's file into DIR."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

JQ = '.artifacts[] | select(.expired | not) | "\\(.size_in_bytes) \\(.name)"'


def _log(entry: dict[str, object]) -> None:
    with open(os.environ["STAND_IN_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _api(argv: list[str]) -> int:
    paths = [a for a in argv if a.startswith("repos/")]
    jq = argv[argv.index("--jq") + 1] if "--jq" in argv else None
    found = (
        re.fullmatch(r"repos/[^/]+/[^/]+/actions/runs/(\d+)/artifacts", paths[0]) if paths else None
    )
    if found is None or "--paginate" not in argv or jq != JQ:
        sys.exit(f"gh stand-in: not served: gh api {' '.join(argv)}")
    store = Path(os.environ["STAND_IN_ARTIFACTS"]) / found.group(1)
    for path in sorted(store.iterdir()):
        print(path.stat().st_size, path.name)
    _log({"tool": "gh api", "run": found.group(1)})
    return 0


def _download(argv: list[str]) -> int:
    run, rest = argv[0], argv[1:]
    opts = dict(zip(rest[::2], rest[1::2], strict=True))
    if set(opts) != {"--repo", "--name", "--dir"}:
        sys.exit(f"gh stand-in: not served: gh run download {' '.join(argv)}")
    source = Path(os.environ["STAND_IN_ARTIFACTS"]) / run / opts["--name"]
    if not source.is_file():
        print(f"no artifact matches {opts['--name']}", file=sys.stderr)
        return 1
    Path(opts["--dir"]).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, Path(opts["--dir"]) / source.name)
    _log({"tool": "gh run download", "run": run, "got": [source.name]})
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["api"]:
        return _api(argv[1:])
    if argv[:2] == ["run", "download"]:
        return _download(argv[2:])
    sys.exit(f"gh stand-in: not served: gh {' '.join(argv)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
