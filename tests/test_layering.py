"""The layers of the code, checked: the picture in the README stays true.

- kpack is the lower layer: nothing under ``kpack/`` imports ``build_tools``;
- ``rocm_kpack`` (rocm-kpack's names, at ``python/rocm_kpack/``) is the top layer over kpack
  and never imports ``build_tools``;
- the shipped packages never import ``sample_tree`` or ``tests`` (neither is installed);
- kpack's packages import only from their own layer or the layers below (``LAYERS``);
- no module imports another package's ``_private`` module: packages talk through their
  public face; the same holds between the packages the templates render (``rocm_sdk``,
  ``rocm_sdk_core``, ``rocm_profiler``, ...);
- no import cycle between modules;
- ``pyproject.toml`` lists every package of the tree.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
#: every top-level package of the tree -> the directory that holds it
PACKAGE_DIRS = {
    "kpack": REPO / "kpack",
    "build_tools": REPO / "build_tools",
    "rocm_kpack": REPO / "python" / "rocm_kpack",
}
SOURCES = tuple(PACKAGE_DIRS)
TEMPLATES = REPO / "templates"
#: the Python packages the templates render, by installed name (``platform/`` imports nothing)
TEMPLATE_PACKAGES = {
    "rocm_sdk": TEMPLATES / "rocm" / "src" / "rocm_sdk",
    "rocm_sdk_core": TEMPLATES / "core",
    "rocm_sdk_devel": TEMPLATES / "devel",
    "rocm_sdk_libraries": TEMPLATES / "libraries",
    "rocm_profiler": TEMPLATES / "profiler",
}
#: top-level modules of the ``rocm`` sdist's build backend
TEMPLATE_BACKEND = TEMPLATES / "rocm" / "_backend"

#: kpack's layers, lowest first; a module may import its own layer and the ones below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kpack.errors",),
    ("kpack.common", "kpack.targets"),
    ("kpack.generic_targets", "kpack.owners"),
    # formats: each reads and writes one kind of bytes
    ("kpack.elf", "kpack.pe", "kpack.bundle", "kpack.archive", "kpack.wheelfile"),
    ("kpack.hipfmt", "kpack.databases"),
    ("kpack.transform",),
    ("kpack.artifact",),
    ("kpack.split", "kpack.resolve", "kpack.unbundle", "kpack.verify"),
    ("kpack.finalize",),
    ("kpack.wheelsplit",),
    ("kpack.cli", "kpack.tools", "kpack.__main__", "kpack"),
    ("rocm_kpack",),
)

#: formats never import each other
FORMATS = LAYERS[3]


def _module_name(path: Path) -> str:
    top = next(d for d in PACKAGE_DIRS.values() if d == path or d in path.parents)
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for top in PACKAGE_DIRS.values()
        for path in sorted(top.rglob("*.py"))
        if "templates" not in path.relative_to(REPO).parts
    }


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(
    module: str, path: Path, known: Mapping[str, Path] | None = None
) -> Iterator[tuple[str, int]]:
    """Every imported module, absolute, with the line; ``from P import m`` names P.m when m
    is a module of the tree (``known``, by default the project's packages)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _package_of(module, path)
    known = _modules() if known is None else known
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yielded = False
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    yield f"{base}.{alias.name}", node.lineno
                    yielded = True
            if not yielded:
                yield base, node.lineno


def _ours(name: str) -> bool:
    return name.split(".")[0] in SOURCES


def _edges() -> list[tuple[str, str, int]]:
    return [
        (module, name, line)
        for module, path in _modules().items()
        for name, line in _imports(module, path)
        if _ours(name)
    ]


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _top(module: str, group: tuple[str, ...]) -> str | None:
    return next((p for p in group if module == p or module.startswith(p + ".")), None)


def _in_kpack_layers(module: str) -> bool:
    return module.split(".")[0] in ("kpack", "rocm_kpack")


def test_kpack_never_imports_build_tools() -> None:
    offenders = [
        f"{m}:{line}: {name}"
        for m, name, line in _edges()
        if _in_kpack_layers(m) and name.split(".")[0] == "build_tools"
    ]
    assert not offenders, offenders


def test_shipped_code_never_imports_the_sample_tree_or_tests() -> None:
    """``sample_tree`` and ``tests`` are not installed: the packages must not need them."""
    offenders = [
        f"{m}:{line}: {name}"
        for m, path in _modules().items()
        for name, line in _imports(m, path)
        if name.split(".")[0] in ("sample_tree", "tests")
    ]
    assert not offenders, offenders


def test_every_kpack_module_has_a_layer() -> None:
    missing = [m for m in _modules() if _in_kpack_layers(m) and _layer(m) is None]
    assert not missing, missing


def test_layers_import_downwards() -> None:
    offenders = []
    for module, name, line in _edges():
        if not (_in_kpack_layers(module) and _in_kpack_layers(name)):
            continue
        here, there = _layer(module), _layer(name)
        assert here is not None and there is not None, (module, name)
        if there > here:
            offenders.append(f"{module}:{line} imports {name} from a higher layer")
        here_fmt, there_fmt = _top(module, FORMATS), _top(name, FORMATS)
        if here_fmt and there_fmt and here_fmt != there_fmt:
            offenders.append(f"{module}:{line}: format {here_fmt} imports format {there_fmt}")
    assert not offenders, "\n".join(offenders)


def _private_owner(name: str) -> str | None:
    """The package whose private module ``name`` is (None: nothing private in it)."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and part != "__main__":
            return ".".join(parts[:i])
    return None


def test_no_private_reach_ins() -> None:
    offenders = []
    for module, name, line in _edges():
        owner = _private_owner(name)
        if owner is None:
            continue
        inside = module == owner or module.startswith(owner + ".")
        if not inside:
            offenders.append(f"{module}:{line} imports {name}, private to {owner}")
    assert not offenders, "\n".join(offenders)


def _template_modules() -> dict[str, Path]:
    out = {path.stem: path for path in sorted(TEMPLATE_BACKEND.glob("*.py"))}
    for name, top in TEMPLATE_PACKAGES.items():
        for path in sorted(top.rglob("*.py")):
            parts = [name, *path.relative_to(top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def test_templates_make_no_private_reach_ins() -> None:
    """The rendered packages talk through public modules too: rocm_sdk_core's and
    rocm_profiler's trampolines call ``rocm_sdk.internal``, never ``rocm_sdk._devel``."""
    modules = _template_modules()
    tops = {m.split(".")[0] for m in modules}
    offenders = []
    for module, path in modules.items():
        for name, line in _imports(module, path, modules):
            owner = _private_owner(name)
            if owner is None or name.split(".")[0] not in tops:
                continue
            if not (module == owner or module.startswith(owner + ".")):
                offenders.append(f"{module}:{line} imports {name}, private to {owner}")
    assert not offenders, "\n".join(offenders)
    assert "rocm_sdk_core._cli" in modules and "rocm_sdk_backend" in modules


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for module, name, _line in _edges():
        target = name
        while target and target not in graph:
            target = target.rpartition(".")[0]
        if target and target != module:
            graph[module].add(target)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_pyproject_lists_every_package() -> None:
    """setuptools cannot discover ``kpack.manifests`` and ``build_tools.templates`` (data
    dirs mapped from the repository root), so the list is explicit and checked here."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    mapped = set(config["tool"]["setuptools"]["package-dir"])
    found = {
        _module_name(init.parent / "__init__.py")
        for top in PACKAGE_DIRS.values()
        for init in top.rglob("__init__.py")
    }
    data = {
        ".".join(d.relative_to(REPO).parts)
        for d in (REPO / "build_tools").iterdir()
        if d.is_dir() and not d.name.startswith("_") and not (d / "__init__.py").exists()
    }
    assert listed == found | mapped | data, (
        f"missing: {sorted((found | mapped | data) - listed)}; extra: {sorted(listed - found)}"
    )
