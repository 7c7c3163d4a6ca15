"""The tools' tables (kpack.common.tables): Markdown in report files; on stdout, drawn by
rich to the width (COLUMNS, 80 in a log) without a line past it or a trailing blank."""

from __future__ import annotations

import io

import pytest

from kpack.common.tables import Table, markdown, print_tables

LONG = "rocm_sdk_libraries_gfx94x_dcgpu-7.10.0.dev0+abcdef-py3-none-manylinux_2_28_x86_64.whl"
TABLE = Table(
    title="Packages written",
    header=("package", "file", "files", "size"),
    rows=(
        ("rocm-sdk-core", "dist/" + LONG, "1234", "149.6 MB"),
        ("rocm", "dist/r.tar.gz", "1", "2 kB"),
    ),
    numeric=frozenset({2, 3}),
)


def test_markdown_right_aligns_numbers() -> None:
    lines = markdown(TABLE)
    assert lines[:4] == [
        "## Packages written",
        "",
        "| package | file | files | size |",
        "| --- | --- | ---: | ---: |",
    ]
    assert lines[4] == f"| rocm-sdk-core | dist/{LONG} | 1234 | 149.6 MB |"
    assert lines[-1] == "" and markdown(Table(title="t", header=("a",), rows=())) == []


@pytest.mark.parametrize("columns", [80, 60, 120])
def test_printed_tables_fit_the_width(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    out = io.StringIO()
    print_tables([TABLE], stream=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Packages written"
    assert all(len(line) <= columns and line == line.rstrip() for line in lines), lines
    rule = next(i for i, line in enumerate(lines) if line.lstrip().startswith("───"))
    last = next(i for i, line in enumerate(lines) if "dist/r.tar.gz" in line)
    first_row = "".join("".join(lines[rule + 1 : last]).split())
    # the long name folds inside its column; the other cells stay whole, on the first line
    assert lines[rule + 1].split()[0] == "rocm-sdk-core"
    assert lines[rule + 1].split()[-2:] == ["149.6", "MB"]
    assert first_row.replace("rocm-sdk-core", "", 1).replace("1234149.6MB", "", 1) == f"dist/{LONG}"


def test_cells_are_plain_text() -> None:
    out = io.StringIO()
    table = Table(title="t", header=("a", "b"), rows=(("[bold]x[/bold]", ":smile:"),))
    print_tables([table], stream=out)
    assert "[bold]x[/bold]" in out.getvalue() and ":smile:" in out.getvalue()
    assert "\x1b[" not in out.getvalue()  # not a terminal: no styles


def test_a_row_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="a row of 1 cells"):
        Table(title="t", header=("a", "b"), rows=(("x",),))
