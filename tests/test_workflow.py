"""Validate .github/workflows/rocm-python-packages.yml offline.

Two checkers, each shown to reject deliberately broken copies:

- ``check-jsonschema --builtin-schema vendor.github-workflows`` (the SchemaStore schema
  vendored inside the PyPI package; run with proxies pointing at a closed loopback port, so
  any network access would fail the test);
- :func:`wiring_problems`: what a schema cannot see — the shard matrix, ``needs``, the
  builder and assembler command lines, declared inputs, pinned actions, no ``${{ }}`` text
  inside shell scripts (script injection), and every script parses with ``bash -n``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parent.parent / ".github/workflows/rocm-python-packages.yml"
PINNED = {
    "actions/checkout": "v4",
    "actions/setup-python": "v5",
    "actions/upload-artifact": "v4",
    "actions/download-artifact": "v4",
}
REQUIRED_INPUTS = {"version", "linux-amdgpu-families", "target-shards", "python-version"}
MATRIX = "${{ fromJSON(inputs.target-shards) }}"


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


def load(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


def _steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    steps = job.get("steps")
    return steps if isinstance(steps, list) else []


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(str(s.get("run", "")) for s in _steps(job))


def _check_pins(doc: dict[str, Any]) -> list[str]:
    problems = []
    for name, job in doc.get("jobs", {}).items():
        for step in _steps(job):
            action, _, ref = str(step.get("uses", "")).partition("@")
            if action and PINNED.get(action) != ref:
                problems.append(f"{name}: {action}@{ref} is not pinned to {PINNED.get(action)}")
    return problems


def _check_scripts(doc: dict[str, Any]) -> list[str]:
    problems = []
    for name, job in doc.get("jobs", {}).items():
        for step in _steps(job):
            script = step.get("run")
            if script is None:
                continue
            if "${{" in str(script):
                problems.append(f"{name}/{step.get('name')}: ${{{{ }}}} inside run:")
            proc = subprocess.run(
                ["bash", "-n"], input=str(script), capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                problems.append(f"{name}/{step.get('name')}: bash -n: {proc.stderr.strip()}")
    return problems


def _command(script: str, program: str) -> list[str]:
    """The words of the first command line of ``script`` that runs ``program``."""
    joined = script.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if program in line)
    words = shlex.split(line)
    return words[words.index(next(w for w in words if w.endswith(program))) + 1 :]


def wiring_problems(text: str) -> list[str]:
    """Every structural problem of the workflow text; empty when it is wired right."""
    doc = load(text)
    call = (doc.get("on") or {}).get("workflow_call") or {}
    inputs = set(call.get("inputs") or {})
    problems = [f"input {i} is not declared" for i in sorted(REQUIRED_INPUTS - inputs)]
    used = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", text))
    problems += [f"inputs.{i} is used but not declared" for i in sorted(used - inputs)]
    if doc.get("permissions") != {"contents": "read"}:
        problems.append(f"workflow permissions are {doc.get('permissions')!r}")
    jobs = doc.get("jobs") or {}
    build, assemble = jobs.get("build") or {}, jobs.get("assemble") or {}
    if (build.get("strategy") or {}).get("matrix", {}).get("shard") != MATRIX:
        problems.append("build: strategy.matrix.shard is not the target-shards list")
    if "--targets" not in _runs(build) or not any(
        (s.get("env") or {}).get("SHARD") == "${{ matrix.shard }}" for s in _steps(build)
    ):
        problems.append("build: the builder does not get --targets from matrix.shard")
    if "upload-artifact" not in str(_steps(build)):
        problems.append("build: no upload of the shard's dist/")
    needs = assemble.get("needs")
    if "build" not in ([needs] if isinstance(needs, str) else needs or []):
        problems.append("assemble: does not need build")
    script = _runs(assemble)
    program = "build_tools/assemble_shards.py"
    words = _command(script, program) if program in script else []
    for flag in ("${args[@]}", "--output", "--index", "--version", "--linux-amdgpu-families"):
        if flag not in words:
            problems.append(f"assemble: assemble_shards.py is not run with {flag}")
    if 'args+=(--input "${shard}dist")' not in script:
        problems.append("assemble: the shards are not passed as --input")
    for part in ("--no-index --find-links merged/dist", "rocm[libraries,device-", "rocm-sdk test"):
        if part not in script:
            problems.append(f"assemble: {part!r} missing from its scripts")
    return problems + _check_pins(doc) + _check_scripts(doc)


# Deliberately broken copies: (what, text replaced, replacement).
SCHEMA_BREAKS = [
    ("no-runs-on", "    runs-on: ${{ inputs.runs-on }}\n    steps:", "    steps:"),
    ("bad-input-type", "type: string", "type: text"),
    ("bad-trigger", "  workflow_call:", "  workflow_cal:"),
    ("matrix-not-a-list", f"        shard: {MATRIX}", "        shard: 5"),
    ("bad-permission", "permissions:\n  contents: read", "permissions:\n  contents: readonly"),
    (
        "uses-and-run",
        "        run: python -m pip install -q .",
        "        uses: actions/checkout@v4\n        run: python -m pip install -q .",
    ),
    ("bad-yaml", "jobs:\n", "jobs:\n  - ["),
]
WIRING_BREAKS = [
    ("no-needs", "    needs: build\n", ""),
    ("matrix-fixed", f"        shard: {MATRIX}", '        shard: ["gfx942"]'),
    ("no-targets", '            --targets "$SHARD" \\\n', ""),
    ("no-index", "            --index index \\\n", ""),
    ("unpinned", "actions/setup-python@v5", "actions/setup-python@main"),
    ("injection", 'grep -F "($canonical)"', 'grep -F "(${{ inputs.version }})"'),
    ("undeclared-input", "${{ inputs.python-version }}", "${{ inputs.python }}"),
    ("bash-syntax", '            args+=(--input "${shard}dist")\n', "            args+=(--input\n"),
    ("no-permissions", "permissions:\n  contents: read\n", ""),
]


def _broken(text: str, old: str, new: str) -> str:
    assert old in text, f"the workflow no longer contains {old!r}; update the break"
    return text.replace(old, new, 1)


@pytest.fixture(scope="module")
def text() -> str:
    return WORKFLOW.read_text(encoding="utf-8")


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
    assert check_jsonschema(WORKFLOW)["status"] == "ok"


def test_wiring(text: str) -> None:
    assert wiring_problems(text) == []
    doc = load(text)
    assert doc["jobs"]["build"]["strategy"]["matrix"]["shard"] == MATRIX
    assert doc["jobs"]["assemble"]["needs"] == "build"
    assert set(doc["on"]["workflow_call"]["inputs"]) >= REQUIRED_INPUTS


@pytest.mark.parametrize(("name", "old", "new"), WIRING_BREAKS, ids=[b[0] for b in WIRING_BREAKS])
def test_wiring_rejects_broken_copies(text: str, name: str, old: str, new: str) -> None:
    assert wiring_problems(_broken(text, old, new)), name


def test_assembler_accepts_the_workflow_command_line(text: str) -> None:
    from build_tools.assemble_shards import _parser

    words = _command(_runs(load(text)["jobs"]["assemble"]), "build_tools/assemble_shards.py")
    assert "${args[@]}" in words
    words[words.index("${args[@]}") : words.index("${args[@]}") + 1] = ["--input", "shards/a"]
    args = _parser().parse_args(words)  # SystemExit (a failure) on an unknown flag
    assert (args.output, args.index, args.version) == (
        Path("merged/dist"),
        Path("index"),
        "$VERSION",
    )
    assert args.linux_amdgpu_families == ["$FAMILIES"]  # list flags are parsed into lists


def test_builder_command_line(text: str) -> None:
    words = _command(_runs(load(text)["jobs"]["build"]), "build_tools/build_python_packages.py")
    pairs = dict(zip(words[::2], words[1::2], strict=True))
    assert pairs == {
        "--artifact-dir": "artifacts",
        "--dest-dir": "out",
        "--version": "$VERSION",
        "--targets": "$SHARD",
        "--linux-amdgpu-families": "$FAMILIES",
    }
