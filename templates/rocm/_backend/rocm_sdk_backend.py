"""In-tree PEP 517 build backend of the ``rocm`` meta package (standard library only).

pip or uv build this sdist on the installing machine, because its dependencies
depend on that machine's GPU (or on ROCM_SDK_TARGET_FAMILY). There are no build
requirements, so an offline ``pip install --no-index --find-links DIR rocm``
works. The wheel is ``rocm-<version>-py3-none-any.whl`` with the ``rocm_sdk``
package and the ``rocm-sdk`` console script, written reproducibly.

A bad input (an unknown ``ROCM_SDK_TARGET_FAMILY``, a ``SOURCE_DATE_EPOCH`` that is no
time an archive can hold, a wheel directory that cannot be written) fails the hook with
one ``error:`` line on stderr and exit status 1: what pip and uv show, without a traceback.
"""

from __future__ import annotations

import sys

# Checked before anything that needs a newer Python, so an older interpreter gets one line
# from pip ("[1 lines of output]") instead of a traceback from deep inside this module.
if sys.version_info < (3, 10):  # noqa: UP036 - this is the check
    sys.stderr.write(
        "error: the rocm package requires Python >= 3.10; this is Python "
        + ".".join(str(part) for part in sys.version_info[:3])
        + " (" + sys.executable + ")\n"
    )
    raise SystemExit(1)

import base64
import functools
import gzip
import hashlib
import importlib.util
import io
import json
import os
import tarfile
import time
import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, TypeVar

import rocm_sdk_requires

ROOT = Path(__file__).resolve().parent.parent
DIST_INFO_PY = ROOT / "src" / "rocm_sdk" / "_dist_info.py"
SELECTION_FILE = "rocm_sdk/_selection.json"
ENTRY_POINTS = "[console_scripts]\nrocm-sdk = rocm_sdk.__main__:main\n"
WHEEL_TAG = "py3-none-any"
_REPLACED_FIELDS = {"metadata-version", "name", "version", "requires-dist", "provides-extra",
                    "dynamic"}
_EXCLUDED_PARTS = {"__pycache__", ".git"}
DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a ZIP entry can hold
MAX_EPOCH = 0xFFFFFFFF  # 2106-02-07T06:28:15Z, the latest time a gzip header can hold
ConfigSettings = dict[str, Any] | None
_Hook = TypeVar("_Hook", bound=Callable[..., Any])


class BackendError(Exception):
    """A bad input of the build: its message is the one line the frontend shows."""


def _one_line_errors(hook: _Hook) -> _Hook:
    """Run ``hook``; a bad input ends the process with one ``error:`` line and status 1.

    Frontends run each hook in a subprocess of its own (PEP 517) and show its output when
    it fails, so exiting here gives the user that line instead of our traceback.
    """

    @functools.wraps(hook)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return hook(*args, **kwargs)
        except BackendError as exc:
            message = str(exc)
        except OSError as exc:  # a full disk, an unwritable directory
            where = exc.filename
            message = f"{where}: {exc.strerror or exc}" if where is not None else str(exc)
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
        raise SystemExit(1)

    return run  # type: ignore[return-value]


@functools.cache
def _load_dist_info() -> ModuleType:
    """The sdist's ``rocm_sdk/_dist_info.py``, loaded once per hook: one detection state, so
    the metadata and _selection.json agree and a bad KFD node is warned about once."""
    spec = importlib.util.spec_from_file_location("_rocm_sdk_build_dist_info", DIST_INFO_PY)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {DIST_INFO_PY}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    previous = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no .pyc in the build tree: a full disk would cut one short
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = previous
    return module


def _file_version(version: str) -> str:
    return version.replace("-", "_")


def _timestamp() -> int:
    """``SOURCE_DATE_EPOCH`` (clamped to 1980 at least), else 1980-01-01: the builder's rule."""
    text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not text:
        return DEFAULT_EPOCH
    try:
        value = int(text)
    except ValueError:
        raise BackendError(
            f"SOURCE_DATE_EPOCH={_shown(text)} is not an integer (seconds since 1970)"
        ) from None
    if value > MAX_EPOCH:
        raise BackendError(
            f"SOURCE_DATE_EPOCH={_shown(text)} is after 2106-02-07T06:28:15Z ({MAX_EPOCH}), the "
            "latest time a gzip header can hold (a time in milliseconds?)"
        )
    return max(value, DEFAULT_EPOCH)


def _shown(value: str, limit: int = 30) -> str:
    """``value`` for a one-line message: quoted with escapes, the first characters only."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def _pkg_info() -> tuple[list[tuple[str, str]], str]:
    """Headers other than those computed here, and the description body."""
    path = ROOT / "PKG-INFO"
    if not path.is_file():
        return [("Summary", "ROCm SDK for Python"), ("Requires-Python", ">=3.10")], ""
    message = HeaderParser().parsestr(path.read_text(encoding="utf-8"))
    headers = [(k, str(v)) for k, v in message.items() if k.lower() not in _REPLACED_FIELDS]
    body = message.get_payload()
    return headers, body if isinstance(body, str) else ""


def resolve(di: ModuleType) -> tuple[str, str]:
    """(target family, source) of this machine; BackendError naming what is wrong (the
    message of ``_dist_info`` names the variable and shows its value safely)."""
    try:
        family, source = di.resolve_target_family()
    except ValueError as exc:
        raise BackendError(str(exc)) from None
    return str(family), str(source)


@functools.lru_cache(maxsize=1)
def _detected(di: ModuleType) -> tuple[str, ...]:
    """This machine's GPUs as ``gfx90a (found by kfd)``, detected once per build."""
    try:
        gpus = di.detect_gpus()
    except ValueError:
        return ()
    return tuple(dict.fromkeys(f"{g.target} (found by {g.source})" for g in gpus))


def _how(di: ModuleType, source: str) -> str:
    """Where the choice came from, in words: the GPUs and how each was found."""
    if source == "env":
        return str(di.TARGET_FAMILY_ENV)
    gpus = _detected(di)
    if source == "discovered":
        return f"this machine's GPUs: {', '.join(gpus) or 'none'}"
    if not gpus:
        return "the build's default, no GPU being found on this machine"
    return f"the build's default, no code of this build being for {', '.join(gpus)}"


def selection(di: ModuleType) -> dict[str, Any] | None:
    """What this machine resolves to: the target family, where it came from (``source``
    as a word, ``how`` in words), and in a kpack-split set what the ``device`` extra
    installs (``device_extra``: distributions, none when no GPU of this machine has code
    in this build)."""
    try:
        family, source = resolve(di)
    except BackendError:
        return None
    chosen: dict[str, Any] = {
        "target_family": family,
        "source": source,
        "how": _how(di, source),
        "version": di.__version__,
    }
    if di.KPACK_MODE:
        extras = rocm_sdk_requires.compute_requirements(di, lambda: (family, source)).extras
        device = extras.get("device", ())
        chosen["device_extra"] = [r.split("==", 1)[0] for r in device]
        if not device:
            targets = rocm_sdk_requires.device_targets(di)
            example = targets[0] if targets else "gfxNNN"
            chosen["device_fix"] = f"pip install 'rocm[device-{example}]=={di.__version__}'"
            chosen["device_targets"] = targets
    return chosen


def _selection_note(chosen: dict[str, Any] | None) -> str:
    if chosen is None:
        return ""
    how = chosen["how"]
    if chosen.get("device_extra") == []:
        what = (
            f"\n\nThis wheel was built on the installing machine. Its `device` extra installed "
            f"no device code ({how}); to install a GPU's: `{chosen['device_fix']}` (this "
            f"build has {', '.join(chosen['device_targets']) or 'none'})."
        )
    else:
        what = (
            f"\n\nThis wheel was built on the installing machine and resolved for GPU target "
            f"family `{chosen['target_family']}` (from {how})."
        )
    return what + (
        " `rocm-sdk targets` shows it; to resolve again (another GPU, or a new "
        "`ROCM_SDK_TARGET_FAMILY`), reinstall without the cached wheel: `pip install "
        "--force-reinstall --no-deps --no-cache-dir rocm==<version>` (uv: `--reinstall "
        "--no-cache`).\n"
    )


def metadata_text() -> str:
    """The wheel METADATA, with dependencies resolved on this machine."""
    di = _load_dist_info()
    reqs = rocm_sdk_requires.compute_requirements(di, lambda: resolve(di))
    for note in reqs.notes:
        print(f"rocm: {note}", file=sys.stderr)
    headers, body = _pkg_info()
    body = body.rstrip("\n") + _selection_note(selection(di)) if body.strip() else body
    fields = [("Metadata-Version", "2.2"), ("Name", "rocm"), ("Version", di.__version__)]
    fields += headers + rocm_sdk_requires.metadata_fields(reqs)
    text = "".join(f"{k}: {v}\n" for k, v in fields)
    return text + ("\n" + body if body.strip() else "")


def _version_of(metadata: str) -> str:
    return HeaderParser().parsestr(metadata)["Version"]


def _dist_info_files(metadata: str) -> dict[str, bytes]:
    wheel = (
        "Wheel-Version: 1.0\nGenerator: rocm_sdk_backend\nRoot-Is-Purelib: true\n"
        f"Tag: {WHEEL_TAG}\n"
    )
    return {
        "METADATA": metadata.encode("utf-8"),
        "WHEEL": wheel.encode("utf-8"),
        "entry_points.txt": ENTRY_POINTS.encode("utf-8"),
        "top_level.txt": b"rocm_sdk\n",
    }


def _tree_files(root: Path) -> list[tuple[str, Path]]:
    """(POSIX relpath, path) of every regular file under ``root``, sorted."""
    files = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if _EXCLUDED_PARTS.intersection(rel.parts) or path.suffix in (".pyc", ".pyo"):
            continue
        if path.is_file():
            files.append((rel.as_posix(), path))
    return sorted(files)


def _mode(path: Path) -> int:
    return 0o755 if os.stat(path).st_mode & 0o111 else 0o644


def _record_row(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}\n"


def _create_new(path: Path) -> BinaryIO:
    """A new file at ``path`` for writing: a leftover of that name (a symlink even) is
    removed first, never written through."""
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags | getattr(os, "O_BINARY", 0), 0o666), "wb")


def _write_wheel(path: Path, members: list[tuple[str, bytes, int]], record_name: str) -> None:
    """Write the wheel to a temporary name beside ``path`` and rename it into place."""
    date_time = time.gmtime(_timestamp())[:6]
    record = "".join(_record_row(name, data) for name, data, _ in members) + f"{record_name},,\n"
    partial = path.with_name(f".{path.name}.partial")
    try:
        with _create_new(partial) as raw, zipfile.ZipFile(raw, "w") as zf:
            for name, data, mode in [*members, (record_name, record.encode(), 0o644)]:
                info = zipfile.ZipInfo(name, date_time=date_time)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3
                info.external_attr = (0o100000 | mode) << 16
                zf.writestr(info, data)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if exc.filename is None:  # a failed write (full disk) names no file
            exc.filename = str(path)
        raise


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return []


@_one_line_errors
def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    _timestamp()  # checked before anything is written: build_wheel will stamp with it
    metadata = metadata_text()
    name = f"rocm-{_file_version(_version_of(metadata))}.dist-info"
    target = Path(metadata_directory) / name
    target.mkdir(parents=True, exist_ok=True)
    for filename, data in _dist_info_files(metadata).items():
        with _create_new(target / filename) as out:
            out.write(data)
    return name


@_one_line_errors
def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: str | None = None,
) -> str:
    if metadata_directory is not None:
        found = sorted(Path(metadata_directory).glob("rocm-*.dist-info/METADATA"))
        metadata = found[0].read_text(encoding="utf-8") if found else metadata_text()
    else:
        metadata = metadata_text()
    version = _file_version(_version_of(metadata))
    dist_info = f"rocm-{version}.dist-info"
    members = [  # src/rocm.egg-info/ describes the sdist (for TheRock's tools), not the wheel
        (rel, path.read_bytes(), _mode(path))
        for rel, path in _tree_files(ROOT / "src")
        if not rel.split("/", 1)[0].endswith(".egg-info")
    ]
    chosen = selection(_load_dist_info())
    if chosen is not None:
        data = (json.dumps(chosen, indent=2, sort_keys=True) + "\n").encode("utf-8")
        members.append((SELECTION_FILE, data, 0o644))
        members.sort()
    members += [(f"{dist_info}/{n}", d, 0o644) for n, d in _dist_info_files(metadata).items()]
    filename = f"rocm-{version}-{WHEEL_TAG}.whl"
    Path(wheel_directory).mkdir(parents=True, exist_ok=True)
    _write_wheel(Path(wheel_directory) / filename, members, f"{dist_info}/RECORD")
    return filename


@_one_line_errors
def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    version = _file_version(_load_dist_info().__version__)
    top = f"rocm-{version}"
    filename = f"{top}.tar.gz"
    Path(sdist_directory).mkdir(parents=True, exist_ok=True)
    mtime = _timestamp()
    path = Path(sdist_directory) / filename
    partial = path.with_name(f".{filename}.partial")
    try:
        with _create_new(partial) as raw, gzip.GzipFile(
            fileobj=raw, mode="wb", mtime=mtime
        ) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, source in _tree_files(ROOT):
                data = source.read_bytes()
                info = tarfile.TarInfo(f"{top}/{rel}")
                info.size, info.mtime, info.mode = len(data), mtime, _mode(source)
                tar.addfile(info, io.BytesIO(data))
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if exc.filename is None:  # a failed write (full disk) names no file
            exc.filename = str(path)
        raise
    return filename
