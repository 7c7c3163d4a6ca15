"""Stand-in for TheRock's ``_therock_utils.artifact_backend.S3Backend``: its ``s3_client``
answers ``list_objects_v2`` pages from the local bucket ``$STAND_IN_BUCKET``, as boto3's
paginator does (``Contents`` with ``Key`` and ``Size``; ``CommonPrefixes`` under a
``Delimiter``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .workflow_outputs import WorkflowOutputRoot


class _Paginator:
    def paginate(
        self, *, Bucket: str, Prefix: str, Delimiter: str = ""
    ) -> Iterator[dict[str, Any]]:
        root = Path(os.environ["STAND_IN_BUCKET"])
        base = root / Prefix
        contents, prefixes = [], []
        for path in sorted(base.rglob("*")):
            key = path.relative_to(root).as_posix()
            below = path.relative_to(base).as_posix()
            if Delimiter and Delimiter in below:
                continue
            if path.is_dir():
                if Delimiter:
                    prefixes.append({"Prefix": key + Delimiter})
                continue
            contents.append({"Key": key, "Size": path.stat().st_size})
        with open(os.environ["STAND_IN_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": "list_objects_v2", "prefix": Prefix}) + "\n")
        yield {"Contents": contents[:2], "CommonPrefixes": prefixes}
        yield {"Contents": contents[2:]}  # a second page: the caller must read every page


class _Client:
    def get_paginator(self, operation: str) -> _Paginator:
        if operation != "list_objects_v2":
            raise SystemExit(f"stand-in: {operation} is not served")
        return _Paginator()


class S3Backend:
    def __init__(self, output_root: WorkflowOutputRoot) -> None:
        self.output_root = output_root
        self.s3_client = _Client()

    @property
    def bucket(self) -> str:
        return self.output_root.bucket

    @property
    def s3_prefix(self) -> str:
        return self.output_root.prefix
