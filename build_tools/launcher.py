"""Launcher stubs for symlinks to executables (``packages.md`` §6).

One compilation per run (``$CC``, default ``cc``); each stub is that binary with the
link's text written after a marker in a reserved buffer, so stubs are deterministic and
cheap. A missing compiler is an error naming the link that needed a stub.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kpack.errors import PackagingError, ToolError

__all__ = ["LauncherTemplate", "compile_launcher"]

_SOURCE = Path(__file__).with_name("launcher.c")
_MARKER = b"@@ROCM-SDK-LAUNCHER-TARGET@@"
_CAPACITY = 4096


@dataclass(frozen=True)
class LauncherTemplate:
    """The compiled stub and where its target buffer starts."""

    image: bytes
    offset: int  # of the marker

    def render(self, link_text: str, *, origin: str) -> bytes:
        raw = link_text.encode("utf-8")
        if os.path.isabs(link_text):
            raise PackagingError(f"launcher target {link_text!r} is absolute", path=origin)
        if b"\0" in raw or len(_MARKER) + len(raw) + 1 > _CAPACITY:
            raise PackagingError(f"launcher target {link_text!r} is too long", path=origin)
        start = self.offset + len(_MARKER)
        patched = bytearray(self.image)
        patched[start : start + len(raw) + 1] = raw + b"\0"
        return bytes(patched)


def compile_launcher(*, needed_by: str) -> LauncherTemplate:
    """Compile the stub with ``$CC``; ``needed_by`` names the link (for the error)."""
    cc = shlex.split(os.environ.get("CC", "cc")) or ["cc"]
    if shutil.which(cc[0]) is None:
        raise ToolError(
            f"C compiler {cc[0]!r} ($CC) not found; it is needed to build a launcher stub "
            f"for the symlink {needed_by}"
        )
    with tempfile.TemporaryDirectory(prefix="rocm-launcher-") as tmp:
        out = Path(tmp) / "launcher"
        cmd = [
            *cc,
            "-O2",
            "-fPIE",
            "-pie",
            "-Wl,--build-id=none",
            "-s",
            "-o",
            str(out),
            str(_SOURCE),
            "-ldl",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolError(
                f"compiling the launcher stub failed (exit {proc.returncode}): "
                f"{shlex.join(cmd)}\n{proc.stdout}{proc.stderr}".rstrip()
            )
        image = out.read_bytes()
    offset = image.find(_MARKER)
    if offset < 0 or image.find(_MARKER, offset + 1) >= 0:
        raise ToolError("launcher stub: target buffer marker not found exactly once")
    return LauncherTemplate(image=image, offset=offset)
