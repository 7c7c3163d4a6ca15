"""Print the structure figures issue reviews ask for: module counts and sizes, function
lengths, ``# fmt: skip`` markers.

    python -m tests.structure_metrics

Counts the project's own code (``kpack``, ``build_tools``, ``sample_tree`` and the installed
runtime under ``templates``), not tests or benchmarks. A function's length is its lines from
``def`` to its last line, decorators and docstring included.
"""

from __future__ import annotations

import ast
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("kpack", "build_tools", "sample_tree", "templates")


def _modules() -> list[Path]:
    return sorted(p for top in SOURCES for p in (REPO / top).rglob("*.py"))


def _function_lengths(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def main() -> int:
    modules = _modules()
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in modules}
    lengths = sorted(n for p in modules for n in _function_lengths(p))
    top = [p for p in (REPO / "kpack").glob("*.py")]
    big = sorted((n, p.relative_to(REPO).as_posix()) for p, n in lines.items() if n > 400)
    skips = sum(p.read_text(encoding="utf-8").count("# fmt: skip") for p in modules)
    deciles = statistics.quantiles(lengths, n=10)
    print(f"modules: {len(modules)}, {sum(lines.values())} lines")
    print(f"modules directly in kpack/: {len(top)}")
    print(f"modules over 400 lines: {len(big)}")
    for n, name in big:
        print(f"  {n:5d}  {name}")
    print(
        f"functions: {len(lengths)}, median {statistics.median(lengths):.0f} lines, "
        f"p90 {deciles[-1]:.0f}, max {lengths[-1]}"
    )
    print(f"'# fmt: skip' markers: {skips}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
