"""Run the jobs of ``.github/workflows/rocm-python-packages.yml`` on this machine, as
written: every ``run:`` script goes to bash as the runner would run it (``defaults.run.shell``
``bash``: ``bash --noprofile --norc -eo pipefail``), with the env the workflow gives it
(workflow, job and step ``env``, expressions evaluated by :mod:`.expressions`) and the
runner's own (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``, ``CI``...); step ``if:``s, job
``outputs``, ``needs`` and the matrix are evaluated as GitHub does.

What runs elsewhere on GitHub is replaced, and only that:

- ``actions/checkout`` of this repository is the installed checkout (the console scripts on
  PATH); of ``ROCm/TheRock`` it lays out the stand-in ``build_tools`` (:mod:`.stand_ins`),
  whose ``fetch_artifacts.py`` and ``_therock_utils`` serve a local bucket;
- ``actions/setup-python`` is this interpreter; ``gh`` is the stand-in serving a local
  artifact store; ``upload-artifact``/``download-artifact`` copy to and from a local store,
  as those actions lay files out;
- steps whose id starts with ``install-`` are skipped, and must run only the pip installs
  :data:`INSTALLS` names (the test environment has them).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .expressions import evaluate, interpolate

__all__ = ["INSTALLS", "JobRun", "LocalGitHub", "StepFailed", "load_workflow"]

STAND_INS = Path(__file__).resolve().parent / "stand_ins"
#: What an ``install-*`` step may run: the test environment has installed it already.
INSTALLS = frozenset({"python -m pip install -q .", "python -m pip install -q boto3"})
_SHELLS = {"bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}


class StepFailed(AssertionError):
    """A step of a job failed: names the job, the step and its output."""


def load_workflow(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


@dataclass(kw_only=True)
class JobRun:
    """One job (one matrix entry) as it ran."""

    job: str
    matrix: dict[str, Any]
    workspace: Path
    outputs: dict[str, str]
    skipped: list[str] = field(default_factory=list)  # install steps
    summary: str = ""  # what its steps wrote to GITHUB_STEP_SUMMARY
    fetched: list[dict[str, Any]] = field(default_factory=list)  # the stand-ins' log lines


@dataclass(kw_only=True)
class LocalGitHub:
    """The services a job reaches, as local directories under ``root``: TheRock's bucket
    (``bucket/<run>-linux/``), this repository's per-archive GitHub artifacts
    (``artifacts/<run>/``), the artifact store of the run itself (``store/<name>/``), and
    the log of what the stand-ins handed out."""

    root: Path
    repository: str = "example/rocm-python-packaging"

    def __post_init__(self) -> None:
        for sub in ("bucket", "artifacts", "store", "bin", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        gh = self.root / "bin" / "gh"
        gh.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAND_INS / "gh.py"}" "$@"\n')
        gh.chmod(0o755)

    @property
    def log(self) -> Path:
        return self.root / "stand-in.log"

    def fetched(self) -> list[dict[str, Any]]:
        """What the stand-ins handed out, call by call."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.root / "bin"), str(Path(sys.executable).parent)])
        return {
            "PATH": f"{path}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "STAND_IN_BUCKET": str(self.root / "bucket"),
            "STAND_IN_ARTIFACTS": str(self.root / "artifacts"),
            "STAND_IN_LOG": str(self.log),
        }

    def run_job(
        self,
        doc: dict[str, Any],
        job_id: str,
        *,
        inputs: dict[str, Any],
        needs: dict[str, Any],
        only: int | None = None,
    ) -> list[JobRun]:
        """Every matrix entry of ``job_id`` (one run without a matrix), in order; ``only``:
        that entry alone."""
        job = doc["jobs"][job_id]
        base = {"inputs": inputs, "github": self._github(), "needs": needs}
        matrix = (job.get("strategy") or {}).get("matrix")
        entries: list[dict[str, Any]] = [{}]
        if matrix is not None:
            ((key, expr),) = matrix.items()
            entries = [{key: v} for v in evaluate(str(expr), base)]
        runs = []
        for n, entry in enumerate(entries):
            if only is not None and n != only:
                continue
            workspace = self.root / "jobs" / f"{job_id}-{n}"
            workspace.mkdir()
            before = len(self.fetched())
            run = self._run_one(doc, job_id, {**base, "matrix": entry}, workspace)
            run.fetched = self.fetched()[before:]
            runs.append(run)
        return runs

    def _github(self) -> dict[str, Any]:
        return {"token": "stand-in-token", "repository": self.repository}

    def _run_one(
        self, doc: dict[str, Any], job_id: str, contexts: dict[str, Any], workspace: Path
    ) -> JobRun:
        job = doc["jobs"][job_id]
        shell = ((doc.get("defaults") or {}).get("run") or {}).get("shell")
        assert shell in _SHELLS, f"defaults.run.shell {shell!r}: the runner knows bash only"
        steps: dict[str, Any] = {}
        run = JobRun(job=job_id, matrix=contexts["matrix"], workspace=workspace, outputs={})
        summary = workspace.parent / f"{workspace.name}.summary.md"
        for step in job["steps"]:
            ctx = {**contexts, "steps": steps}
            if "if" in step and not evaluate(str(step["if"]), ctx):
                continue
            env = {**(doc.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
            env = {k: interpolate(str(v), ctx) for k, v in env.items()}
            if "uses" in step:
                self._action(step, ctx, workspace)
                continue
            if str(step.get("id", "")).startswith("install-"):
                assert step["run"].strip() in INSTALLS, f"{job_id}: unknown install {step['run']!r}"
                run.skipped.append(step["name"])
                continue
            outputs = self._script(job_id, step, env, workspace, summary, shell)
            if "id" in step:
                steps[step["id"]] = {"outputs": outputs}
        ctx = {**contexts, "steps": steps}
        run.outputs = {k: interpolate(str(v), ctx) for k, v in (job.get("outputs") or {}).items()}
        run.summary = summary.read_text() if summary.exists() else ""
        return run

    def _script(
        self,
        job_id: str,
        step: dict[str, Any],
        env: dict[str, str],
        workspace: Path,
        summary: Path,
        shell: str,
    ) -> dict[str, str]:
        output = workspace.parent / f"{workspace.name}.output"
        output.write_text("")
        script = workspace.parent / f"{workspace.name}.step.sh"
        script.write_text(str(step["run"]))
        full = {
            **os.environ,
            **self.env(),
            **env,
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNNER_TEMP": str(self.root / "tmp"),
        }
        proc = subprocess.run(
            [*_SHELLS[shell], str(script)],
            cwd=workspace,
            env=full,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise StepFailed(
                f"{job_id} / {step.get('name')}: exit {proc.returncode}\n"
                f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
            )
        return _read_outputs(output)

    def _action(self, step: dict[str, Any], ctx: dict[str, Any], workspace: Path) -> None:
        action = str(step["uses"]).partition("@")[0]
        given = {k: interpolate(str(v), ctx) for k, v in (step.get("with") or {}).items()}
        if action == "actions/checkout":
            if given.get("repository") == "ROCm/TheRock":
                shutil.copytree(STAND_INS / "therock", workspace / given["path"])
            else:
                assert "repository" not in given, given  # this repository: installed already
        elif action == "actions/setup-python":
            pass  # this interpreter
        elif action == "actions/upload-artifact":
            self._upload(given, workspace)
        elif action == "actions/download-artifact":
            self._download(given, workspace)
        else:
            raise AssertionError(f"the runner does not know {step['uses']}")

    def _upload(self, given: dict[str, str], workspace: Path) -> None:
        """As upload-artifact lays the files out: relative to the paths' common parent."""
        paths = [workspace / p.strip() for p in given["path"].splitlines() if p.strip()]
        missing = [p for p in paths if not p.exists()]
        if missing and given.get("if-no-files-found") == "error":
            raise StepFailed(f"upload-artifact {given['name']}: no {missing}")
        root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in paths]))
        if len(paths) == 1 and paths[0].is_dir():
            root = paths[0]
        dest = self.root / "store" / given["name"]
        assert not dest.exists(), f"artifact {given['name']} uploaded twice"
        for path in paths:
            target = dest / path.relative_to(root)
            if path.is_dir():
                shutil.copytree(path, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)

    def _download(self, given: dict[str, str], workspace: Path) -> None:
        """A name into ``path``; a pattern: each artifact into ``path/<name>/``."""
        store = self.root / "store"
        dest = workspace / given.get("path", ".")
        if "name" in given:
            shutil.copytree(store / given["name"], dest, dirs_exist_ok=True)
            return
        names = sorted(n.name for n in store.iterdir() if fnmatch.fnmatch(n.name, given["pattern"]))
        assert names, f"download-artifact: nothing matches {given['pattern']}"
        for name in names:
            shutil.copytree(store / name, dest / name)


def _read_outputs(path: Path) -> dict[str, str]:
    """``name=value`` lines and ``name<<DELIM`` blocks, as GitHub reads ``GITHUB_OUTPUT``."""
    outputs: dict[str, str] = {}
    lines = path.read_text().splitlines()
    while lines:
        line = lines.pop(0)
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            block = []
            while lines[0] != delim:
                block.append(lines.pop(0))
            lines.pop(0)
            outputs[name] = "\n".join(block)
        elif line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs
