"""The reusable workflow, run (issue 31, item 6): its plan, build and assemble jobs' scripts
as written in ``.github/workflows/rocm-python-packages.yml``, by :mod:`.runner`, against a
local TheRock bucket (kpack-split and legacy sample trees as TheRock's archives, among the
files a bucket also holds) or a run's per-archive GitHub artifacts. The plan job lists the
bucket and fetches ``base_lib_generic`` alone; each build job fetches, through TheRock's
``fetch_artifacts.py`` command line (served locally), exactly the files its shard lists and
runs the shard's arguments; the assemble job merges, indexes, installs into a fresh venv
and runs ``rocm-sdk test``. The assembled output equals the one-machine build byte for
byte. A workflow that fetches more than the plan lists fails, in its own check and in the
runner's."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.build_tools.shards.trees import sample_archives

from .runner import JobRun, LocalGitHub, StepFailed, load_workflow

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

WORKFLOW = Path(__file__).resolve().parents[2] / ".github/workflows/rocm-python-packages.yml"
VERSION = "7.99.0.dev0"
RUN = "424242"
BIN = Path(sys.executable).parent  # the console scripts of the installed checkout


@pytest.fixture(scope="module")
def archives(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_archives(tmp_path_factory.mktemp(request.param), request.param == "kpack")


@pytest.fixture(scope="module")
def one_machine(archives: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    dest = tmp_path_factory.mktemp("one") / "out"
    _builder("--artifact-dir", str(archives), "--dest-dir", str(dest), "--version", VERSION, "-q")
    return _outputs(dest)


def _builder(*argv: str) -> str:
    proc = subprocess.run(
        [str(BIN / "build-python-packages"), *argv], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _outputs(root: Path) -> dict[str, str]:
    """Every output file below ``root`` (records and staging leftovers aside): its digest."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def _services(tmp: Path, archives: Path, source: str) -> tuple[LocalGitHub, dict[str, Any]]:
    github = LocalGitHub(root=tmp / "github")
    if source == "therock":
        run = github.root / "bucket" / f"{RUN}-linux"
        shutil.copytree(archives, run)
        # what else a run's bucket holds: sidecars, the index page, logs below a prefix
        digest = hashlib.sha256((run / "base_lib_generic.tar.zst").read_bytes()).hexdigest()
        (run / "base_lib_generic.tar.zst.sha256sum").write_text(digest + "\n")
        (run / "index.html").write_text("<html></html>\n")
        (run / "logs").mkdir()
        (run / "logs" / "build.log").write_text("log\n")
        given = {"therock-run-id": RUN}
    else:
        shutil.copytree(archives, github.root / "artifacts" / RUN)
        given = {"artifacts-run-id": RUN}
    return github, {**given, "version": VERSION, "shards": 3}


def _inputs(doc: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The ``inputs`` context: what the caller gives, the declared defaults for the rest."""
    declared = doc["on"]["workflow_call"]["inputs"]
    assert set(given) <= set(declared), set(given) - set(declared)
    missing = [k for k, v in declared.items() if v.get("required") and k not in given]
    assert not missing, missing
    return {k: given.get(k, v.get("default")) for k, v in declared.items()}


def _fetch_problems(builds: list[JobRun]) -> list[str]:
    """Each build job must have fetched its shard's files: no more, no fewer."""
    problems = []
    for run in builds:
        shard = run.matrix["shard"]
        got = sorted(f for call in run.fetched for f in call.get("got", []))
        if got != sorted(shard["files"]):
            extra = sorted(set(got) - set(shard["files"]))
            missing = sorted(set(shard["files"]) - set(got))
            problems.append(f"{shard['name']}: fetched {extra} beyond the plan, missed {missing}")
    return problems


def _run_pipeline(
    github: LocalGitHub, doc: dict[str, Any], inputs: dict[str, Any]
) -> tuple[JobRun, list[JobRun], JobRun]:
    (plan,) = github.run_job(doc, "plan", inputs=inputs, needs={})
    needs = {"plan": {"outputs": plan.outputs, "result": "success"}}
    builds = github.run_job(doc, "build", inputs=inputs, needs=needs)
    needs["build"] = {"outputs": {}, "result": "success"}
    (assemble,) = github.run_job(doc, "assemble", inputs=inputs, needs=needs)
    return plan, builds, assemble


@pytest.mark.parametrize(
    ("archives", "source"),
    [("kpack", "therock"), ("legacy", "therock"), ("kpack", "github")],
    indirect=["archives"],
)
def test_the_workflow_builds_the_one_machine_output(
    archives: Path, one_machine: dict[str, str], tmp_path: Path, source: str
) -> None:
    kpack = archives.parent.name.startswith("kpack")
    doc = load_workflow(WORKFLOW)
    github, given = _services(tmp_path, archives, source)
    plan, builds, assemble = _run_pipeline(github, doc, _inputs(doc, given))

    # the plan job read a listing and base_lib_generic alone, and planned as a local plan does
    shards = json.loads(plan.outputs["shards"])
    local = json.loads(
        _builder("--artifact-dir", str(archives), "--print-shards", "3", "--version", VERSION)
    )
    assert shards == local
    assert [f for call in plan.fetched for f in call.get("got", [])] == ["base_lib_generic.tar.zst"]
    assert len(shards) == (3 if kpack else 1)
    for shard in shards:
        assert f"| {shard['name']} |" in plan.summary
    assert plan.outputs["device-target"] == (shards[1]["targets"][0] if kpack else "")
    assert sorted(plan.skipped) == sorted(
        [
            "Install the builder",
            *(["Install what TheRock's fetch scripts import"] if source == "therock" else []),
        ]
    )

    # one build job per shard, each fed exactly its files
    assert [b.matrix["shard"] for b in builds] == shards
    assert _fetch_problems(builds) == []

    # assembled: byte for byte the one-machine build (dist/, report.json, report.md)
    merged = _outputs(assemble.workspace / "merged")
    assert any(name.endswith(".whl") for name in merged) and "report.json" in merged
    assert merged == one_machine
    assert (assemble.workspace / "venv" / "bin" / "rocm-sdk").exists()  # installed, self-tested
    if kpack:  # a device shard that never ran: assembly names its missing wheels
        dists = [
            github.root / "store" / f"rocm-python-dist-shard-{s['name']}" / "dist" for s in shards
        ]
        proc = subprocess.run(
            [
                str(BIN / "assemble-shards"),
                "--input",
                *map(str, dists[:-1]),
                "--dest-dir",
                str(tmp_path / "short"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 1
        for target in shards[-1]["targets"]:
            assert f"requires rocm-sdk-device-{target}, but no shard built it" in proc.stderr
    store = sorted(p.name for p in (github.root / "store").iterdir())
    assert store == sorted(
        ["rocm-python-dist", "rocm-python-dist-index"]
        + [f"rocm-python-dist-shard-{s['name']}" for s in shards]
    )


def _mutant(tmp: Path, old: str, new: str) -> dict[str, Any]:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert old in text, f"the workflow no longer contains {old!r}; update the mutant"
    path = tmp / "mutant.yml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return load_workflow(path)


_FETCH = "          mapfile -t patterns < patterns.txt\n"
_CHECK = "      - name: Check that the inputs are the planned files, no more, no fewer\n"


@pytest.mark.parametrize("archives", ["kpack"], indirect=True)  # shards reading part of it
def test_fetching_beyond_the_plan_fails(archives: Path, tmp_path: Path) -> None:
    """A build job that asks TheRock's fetch for one pattern more: the workflow's own check
    stops it; with that check gone too, the runner's comparison still sees it."""
    github, given = _services(tmp_path, archives, "therock")
    greedy = _FETCH + "          patterns+=('_generic')\n"
    doc = _mutant(tmp_path, _FETCH, greedy)
    inputs = _inputs(doc, given)
    (plan,) = github.run_job(doc, "plan", inputs=inputs, needs={})
    needs = {"plan": {"outputs": plan.outputs, "result": "success"}}
    with pytest.raises(StepFailed, match="beyond the plan"):
        github.run_job(doc, "build", inputs=inputs, needs=needs, only=1)
    text = WORKFLOW.read_text(encoding="utf-8").replace(_FETCH, greedy, 1)
    start = text.index(_CHECK)
    text = text[:start] + text[text.index("      - name: Build the shard's packages\n") :]
    path = tmp_path / "unchecked.yml"
    path.write_text(text, encoding="utf-8")
    unchecked = load_workflow(path)
    github, given = _services(tmp_path / "again", archives, "therock")
    builds = github.run_job(
        unchecked, "build", inputs=_inputs(unchecked, given), needs=needs, only=1
    )
    assert any("beyond the plan" in p for p in _fetch_problems(builds))
