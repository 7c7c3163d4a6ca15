"""A wheel's file name read by ``packaging.utils.parse_wheel_filename`` (issue 33, item 5):
the fields as the name spells them, every malformed name one error saying what is wrong —
names the old hand-written split took (a version that is none, a bad build tag, spaces)
included."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpack.errors import PackagingError
from kpack.wheelfile._source import parse_filename


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        (
            "torch-2.9.0-cp311-cp311-linux_x86_64.whl",
            ("torch", "2.9.0", None, "cp311-cp311-linux_x86_64"),
        ),
        (
            "jax_rocm7_plugin-0.10.0-1rc-py3-none-any.whl",
            ("jax_rocm7_plugin", "0.10.0", "1rc", "py3-none-any"),
        ),
        (
            "x-1.0-py2.py3-none-manylinux_2_28_x86_64.whl",
            ("x", "1.0", None, "py2.py3-none-manylinux_2_28_x86_64"),
        ),
    ],
)
def test_fields_as_spelled(name: str, fields: tuple[str, str, str | None, str]) -> None:
    assert parse_filename(Path(name)) == fields


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a-b-c.whl", "wrong number of parts"),
        ("torch-notaversion-py3-none-any.whl", "invalid version"),
        ("to rch-1.0-py3-none-any.whl", "invalid project name"),
        ("torch-1.0--py3-none-any.whl", "invalid build number"),
        ("torch-1.0-py3-none-.whl", "invalid tag component"),
    ],
)
def test_a_malformed_name_is_one_error_saying_why(name: str, why: str) -> None:
    with pytest.raises(PackagingError) as info:
        parse_filename(Path(name))
    assert str(info.value) == (
        f"{name}: not a wheel file name ({why}): expected "
        "<name>-<version>[-<build>]-<py>-<abi>-<platform>.whl"
    )


def test_a_variant_label_keeps_its_own_error() -> None:
    with pytest.raises(PackagingError, match="variant wheels"):
        parse_filename(Path("torch-2.9.0-gfx942-py3-none-any.whl"))
