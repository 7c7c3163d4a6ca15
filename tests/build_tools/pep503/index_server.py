"""A static simple-repository server on 127.0.0.1 for the installer tests, as a release
engineer would put one up: the files of an index directory, a directory answered with its
``index.json`` when the client asks for PEP 691 JSON (``Accept``) and its ``index.html``
otherwise. It records every request (path and bytes sent), so a test can show that a
resolver fetched metadata and no wheel.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from build_tools.pep503 import JSON_CONTENT_TYPE

__all__ = ["Served", "serve_index"]

_TYPES = {".html": "text/html; charset=utf-8", ".json": JSON_CONTENT_TYPE}


@dataclass
class Served:
    """The server's address and what it served: (request path, name of the file served,
    bytes of the body sent)."""

    url: str
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bytes_for(self, suffix: str) -> int:
        """Bytes sent of the files whose name ends with ``suffix``."""
        with self.lock:
            return sum(size for _, name, size in self.requests if name.endswith(suffix))

    def files(self) -> list[str]:
        """The names of the files served, in order."""
        with self.lock:
            return [name for _, name, _ in self.requests]


def _handler(root: Path, served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _resolve(self) -> Path | None:
            rel = unquote(urlsplit(self.path).path).lstrip("/")
            path = (root / rel).resolve()
            if root != path and root not in path.parents:
                return None
            if path.is_dir():
                wants_json = JSON_CONTENT_TYPE in self.headers.get("Accept", "")
                path = path / ("index.json" if wants_json else "index.html")
            return path if path.is_file() else None

        def _answer(self, send_body: bool) -> None:
            path = self._resolve()
            if path is None:
                self.send_error(404)
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", _TYPES.get(path.suffix, "application/octet-stream"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if send_body:
                self.wfile.write(data)
            with served.lock:
                served.requests.append((self.path, path.name, len(data) if send_body else 0))

        def do_GET(self) -> None:
            self._answer(True)

        def do_HEAD(self) -> None:
            self._answer(False)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def serve_index(root: Path) -> Iterator[Served]:
    """Serve ``root`` on 127.0.0.1 (a free port) while the block runs."""
    root = root.resolve()
    served = Served("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, served))
    served.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
