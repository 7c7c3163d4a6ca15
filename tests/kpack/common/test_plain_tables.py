"""Tables drawn without rich (kpack.common.plain_tables) are what rich draws: on a thousand
random tables at several widths, every plain drawing equals print_tables' drawing by rich,
byte for byte, and the plain one is used wherever it applies."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.common import tables as tables_module
from kpack.common.plain_tables import plain_lines, plain_width
from kpack.common.tables import Table, print_tables

ROOT = Path(__file__).resolve().parents[3]
WIDTHS = (20, 40, 80, 132)
_WORDS = ("wheel", "gfx90a", "amd_device_gfx1030-7.1.0-py3-none-linux_x86_64.whl", "-", "1",
          "3.1 kB", "host", "target", "a b  c", " lead", "trail ", "", "x" * 30)  # fmt: skip


def _random_table(rng: random.Random) -> Table:
    columns = rng.randint(1, 5)
    header = tuple(rng.choice(_WORDS[:8]) for _ in range(columns))
    rows = tuple(
        tuple(rng.choice(_WORDS) for _ in range(columns)) for _ in range(rng.randint(1, 6))
    )
    numeric = frozenset(i for i in range(columns) if rng.random() < 0.4)
    title = rng.choice(["", "Split x.whl (10.4 kB)", "t", "A title " * rng.randint(1, 12)])
    return Table(title=title, header=header, rows=rows, numeric=numeric)


def _drawn_by_rich(table: Table, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(tables_module, "plain_width", lambda stream: None)  # rich draws
        out = io.StringIO()
        print_tables([table], stream=out)
    return out.getvalue()


def test_plain_drawings_are_rich_s(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(32)
    plain_drawn = 0
    for _ in range(250):
        table = _random_table(rng)
        for width in WIDTHS:
            monkeypatch.setenv("COLUMNS", str(width))
            lines = plain_lines(table, width)
            if lines is None:
                continue
            plain_drawn += 1
            assert "".join(f"{line}\n" for line in lines) == _drawn_by_rich(table, monkeypatch), (
                table,
                width,
            )
    assert plain_drawn > 300  # most of the 1000 drawings fit: the comparison is not vacuous


@pytest.mark.parametrize(
    ("cells", "why"),
    [
        (("a" * 70, "b"), "a cell folds"),
        (("gfx90a:xnack+",), None),
        (("[bold]x",), "rich reads markup"),
        (("ünïcode",), "not ASCII"),
        (("tab\there",), "not printable"),
    ],
)
def test_what_rich_alone_draws(cells: tuple[str, ...], why: str | None) -> None:
    table = Table(title="T", header=tuple(f"h{i}" for i in range(len(cells))), rows=(cells,))
    assert (plain_lines(table, 60) is None) == (why is not None), why


def test_a_title_wider_than_the_width_is_rich_s(monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table(title="A title " * 4, header=("a", "b"), rows=(("1", "2"),))
    assert plain_lines(table, 24) is None
    monkeypatch.setenv("COLUMNS", "24")
    assert len(_drawn_by_rich(table, monkeypatch).splitlines()[0]) <= 24  # folded


def test_the_width_rich_would_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("COLUMNS", "97")
    assert plain_width(io.StringIO()) == 97
    monkeypatch.setenv("COLUMNS", "10")
    assert plain_width(io.StringIO()) is None  # too narrow: rich's
    monkeypatch.setenv("COLUMNS", "97")
    for variable in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.setenv(variable, "1")
        assert plain_width(io.StringIO()) is None  # rich would treat the stream as a terminal
        monkeypatch.delenv(variable)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert plain_width(Terminal()) is None


def test_a_split_s_table_is_drawn_without_rich() -> None:
    """print_tables of a split's wheel table, in a fresh interpreter writing to a pipe:
    the same lines as rich draws, and rich never imported."""
    code = (
        "import sys\n"
        "from kpack.common.tables import Table, print_tables\n"
        "rows = tuple((f'amd_device_gfx90{i}-1.0-py3-none-any.whl', 'target', '1', '3.1 kB')"
        " for i in range(6))\n"
        "print_tables([Table(title='Split x-1.0-py3-none-any.whl (10.4 kB)', "
        "header=('wheel', 'holds', 'kernels', 'size'), rows=rows, numeric=frozenset({2, 3}))])\n"
        "print(any(m == 'rich' or m.startswith('rich.') for m in sys.modules))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    )
    *drawn, imported = proc.stdout.splitlines()
    assert imported == "False"
    assert drawn[0] == "Split x-1.0-py3-none-any.whl (10.4 kB)" and drawn[3].startswith(" ─")
    assert len(drawn) == 11 and drawn[-1] == ""
