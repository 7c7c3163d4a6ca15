"""YAML manifests and their JSON renderings (kpack.common.yamlfile): a rendering of exactly
the YAML bytes is read instead of parsing them, anything else falls back to PyYAML, and the
shipped manifests' renderings are current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kpack.common.yamlfile import RENDERING_SUFFIX, main, read_yaml, render
from kpack.errors import ManifestError

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = sorted((ROOT / "manifests").glob("*.yaml"))


def _rendering(path: Path) -> Path:
    return path.with_name(path.name + RENDERING_SUFFIX)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_every_shipped_manifest_has_a_current_rendering(manifest: Path) -> None:
    current = _rendering(manifest)
    assert current.is_file() and current.read_bytes() == render(manifest), (
        f"{current.name} is stale: python -m kpack.common.yamlfile manifests/*.yaml"
    )


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_a_rendering_holds_what_pyyaml_reads(manifest: Path) -> None:
    expected = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    data = read_yaml(manifest, error=ManifestError)
    assert data == expected
    assert json.dumps(data) == json.dumps(expected)  # mappings in file order too


def _copy(tmp_path: Path) -> Path:
    yaml_file = tmp_path / "databases.yaml"
    source = ROOT / "manifests" / "databases.yaml"
    yaml_file.write_bytes(source.read_bytes())
    _rendering(yaml_file).write_bytes(_rendering(source).read_bytes())
    return yaml_file


def test_the_rendering_is_what_is_read(tmp_path: Path) -> None:
    """A rendering of these bytes is read, not the YAML: one whose data says otherwise
    (made so here) is believed."""
    yaml_file = _copy(tmp_path)
    doc = json.loads(_rendering(yaml_file).read_bytes())
    doc["data"] = {"from": "the rendering"}
    _rendering(yaml_file).write_text(json.dumps(doc))
    assert read_yaml(yaml_file, error=ManifestError) == {"from": "the rendering"}


@pytest.mark.parametrize(
    "damage",
    ["edited YAML", "bad JSON", "no data", "other format", "no rendering"],
)
def test_anything_but_a_rendering_of_these_bytes_is_passed_over(
    tmp_path: Path, damage: str
) -> None:
    yaml_file = _copy(tmp_path)
    rendering = _rendering(yaml_file)
    doc = json.loads(rendering.read_bytes())
    if damage == "edited YAML":
        yaml_file.write_text("handlers: {}\n# edited after the rendering\n")
    elif damage == "bad JSON":
        rendering.write_bytes(rendering.read_bytes()[:-40])
    elif damage == "no data":
        rendering.write_text(json.dumps({k: v for k, v in doc.items() if k != "data"}))
    elif damage == "other format":
        rendering.write_text(json.dumps({**doc, "format": "something-else/9"}))
    else:
        rendering.unlink()
    expected = yaml.safe_load(yaml_file.read_text(encoding="utf-8"))
    assert read_yaml(yaml_file, error=ManifestError) == expected


def test_errors_of_the_yaml_stay_the_yaml_s(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("handlers: [unclosed\n")
    with pytest.raises(ManifestError, match=r"broken\.yaml: cannot read YAML"):
        read_yaml(broken, error=ManifestError)
    broken.write_bytes(b"handlers: \xff\n")
    with pytest.raises(ManifestError, match=r"broken\.yaml: not UTF-8 text"):
        read_yaml(broken, error=ManifestError)


@pytest.mark.parametrize("text", ["1: one\n", "when: 2024-01-01\n", "x: .nan\n"])
def test_data_json_cannot_carry_gets_no_rendering(tmp_path: Path, text: str) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text(text)
    with pytest.raises(ManifestError, match="JSON cannot carry"):
        render(odd)
    assert main([str(odd)]) == 1
    assert not _rendering(odd).exists()


def test_main_writes_renderings_that_read_back(tmp_path: Path) -> None:
    doc = tmp_path / "doc.yaml"
    doc.write_text("b: [1, 2.5, true, null]\na: text\n")
    assert main([str(doc)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.yaml", "doc.yaml.json"]
    assert list(read_yaml(doc, error=ManifestError)) == ["b", "a"]
    assert read_yaml(doc, error=ManifestError) == {"b": [1, 2.5, True, None], "a": "text"}


def test_reading_a_rendered_manifest_imports_no_yaml() -> None:
    code = (
        "import sys; from kpack.common.yamlfile import read_yaml; "
        "from kpack.errors import ManifestError; "
        "read_yaml('manifests/databases.yaml', error=ManifestError); "
        "print('yaml' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert proc.stdout.strip() == "False"
