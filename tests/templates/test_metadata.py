"""templates/metadata: wheel METADATA and sdist PKG-INFO."""

from __future__ import annotations

from email.parser import HeaderParser

import pytest
from packaging.metadata import Metadata

from tests.templates.tpl_rendering import render

BASE = {
    "name": "rocm-sdk-device-gfx942",
    "version": "7.1.0rc1",
    "summary": "ROCm device code for gfx942",
    "description": "# Device code\n\nFor **gfx942**.\n",
    "requires_dist": ["rocm-sdk-libraries==7.1.0rc1"],
    "provides_extra": [],
    "dynamic": [],
}


def test_wheel_metadata() -> None:
    text = render("metadata/METADATA.j2", BASE)
    meta = Metadata.from_email(text, validate=True)
    assert meta.metadata_version == "2.1"
    assert str(meta.name) == "rocm-sdk-device-gfx942" and str(meta.version) == "7.1.0rc1"
    assert [str(r) for r in meta.requires_dist or []] == ["rocm-sdk-libraries==7.1.0rc1"]
    assert str(meta.requires_python) == ">=3.10"
    assert meta.description == "# Device code\n\nFor **gfx942**.\n"
    assert text.endswith("For **gfx942**.\n")


def test_wheel_metadata_without_description_or_requirements() -> None:
    text = render("metadata/METADATA.j2", {**BASE, "description": "", "requires_dist": []})
    meta = Metadata.from_email(text, validate=True)
    assert meta.requires_dist is None and "Description-Content-Type" not in text
    assert text.endswith(">=3.10\n")


def test_extras_and_dynamic() -> None:
    ctx = {
        **BASE,
        "name": "rocm",
        "provides_extra": ["devel"],
        "dynamic": ["Requires-Dist"],
        "requires_dist": ["rocm-sdk-core==7.1.0rc1", 'rocm-sdk-devel==7.1.0rc1; extra == "devel"'],
    }
    meta = Metadata.from_email(render("metadata/METADATA.j2", ctx), validate=True)
    assert meta.metadata_version == "2.2"
    assert meta.provides_extra == ["devel"] and meta.dynamic == ["requires-dist"]


def test_sdist_pkg_info_marks_dependencies_dynamic() -> None:
    ctx = {**BASE, "name": "rocm", "dynamic": ["Requires-Dist"]}
    text = render("metadata/PKG-INFO.j2", ctx)
    meta = Metadata.from_email(text, validate=True)
    assert meta.metadata_version == "2.2"
    assert sorted(meta.dynamic or []) == ["provides-extra", "requires-dist"]
    assert HeaderParser().parsestr(text).get_all("Dynamic") == ["Requires-Dist", "Provides-Extra"]


@pytest.mark.parametrize("field", ["name", "version", "summary"])
def test_values_cannot_inject_headers(field: str) -> None:
    text = render("metadata/METADATA.j2", {**BASE, field: "x\nRequires-Dist: evil\r\nY: z"})
    headers = HeaderParser().parsestr(text)
    assert headers.get_all("Requires-Dist") == ["rocm-sdk-libraries==7.1.0rc1"]
    assert "Y" not in headers
