"""The one size parser of every tool's size flags (kpack.common.cli.parse_size): decimal as
the tools print sizes, binary only when spelled so; anything else is a usage error."""

from __future__ import annotations

import argparse

import pytest

from kpack.common.cli import format_size, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123", 123),
        ("500MB", 500_000_000),
        ("500mb", 500_000_000),
        ("500M", 500_000_000),
        ("1.5GB", 1_500_000_000),
        ("64 kB", 64_000),
        ("2T", 2 * 10**12),
        (".5MB", 500_000),
        ("64GiB", 64 << 30),
        ("1KiB", 1024),
        ("10B", 10),
    ],
)
def test_sizes_are_decimal_unless_spelled_binary(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "0", "0.4", "-1", "MB", "5XB", "nan", "inf", "1e3", "9EB"])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text).replace(".", r"\.")):
        parse_size(text)


@pytest.mark.parametrize("n", [999, 1000, 1_500_000, 500_000_000, 7_300_000_000])
def test_what_format_size_prints_parses_back(n: int) -> None:
    shown = format_size(n).replace(" ", "")
    assert abs(parse_size(shown) - n) <= n * 0.001
