"""``variant.json`` of variant wheels (PEP 825 / variantlib layouts, variants.md §4, §11)
and the index-level ``{name}-{version}-variants.json`` (§5)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from kpack.errors import PackagingError, UsageError

__all__ = [
    "NULL_LABEL",
    "SCHEMAS",
    "VariantSchema",
    "check_label",
    "merge_index",
    "render_json",
    "variant_document",
]

VariantSchema = Literal["0.1.1", "0.2.0"]
SCHEMAS: dict[str, str] = {
    "0.1.1": "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json",
    "0.2.0": "https://variants-schema.wheelnext.dev/v0.2.0.json",
}
NULL_LABEL = "null"
NAMESPACE = "amd"
FEATURE = "gfx_arch"
PROVIDER = {
    "requires": ["rocm-bootstrap>=0.3,<0.4"],
    "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin",
}
_LABEL = re.compile(r"[0-9a-z._]{1,16}")
_VALUE = re.compile(r"[a-z0-9_.]+")


def check_label(label: str) -> str:
    if not _LABEL.fullmatch(label):
        raise UsageError(f"invalid variant label {label!r}: use 1-16 of [0-9a-z._]")
    if label == NULL_LABEL:
        raise UsageError("the label 'null' is reserved for the null variant")
    return label


def variant_document(label: str, values: Iterable[str], schema: VariantSchema) -> dict[str, Any]:
    """One wheel's ``variant.json``: exactly one variant, keyed by the wheel's label."""
    ordered = sorted(set(values))
    bad = [v for v in ordered if not _VALUE.fullmatch(v)]
    if bad:
        raise PackagingError(f"invalid {NAMESPACE} :: {FEATURE} values: {', '.join(bad)}")
    if (label == NULL_LABEL) != (not ordered):
        raise PackagingError("only the null variant (label 'null') has no properties")
    properties = {NAMESPACE: {FEATURE: ordered}} if ordered else {}
    return {
        "$schema": SCHEMAS[schema],
        "default-priorities": {"namespace": [NAMESPACE]},
        "providers": {NAMESPACE: dict(PROVIDER)},
        "variants": {label: properties},
    }


def merge_index(documents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The union of the wheels' documents; a label must always mean the same properties."""
    merged: dict[str, Any] = {}
    variants: dict[str, Any] = {}
    for doc in documents:
        for key in ("$schema", "default-priorities", "providers"):
            if merged.setdefault(key, doc[key]) != doc[key]:
                raise PackagingError(f"variant.json documents disagree on {key!r}")
        for label, props in doc["variants"].items():
            if variants.setdefault(label, props) != props:
                raise PackagingError(f"variant label {label!r} maps to two property sets")
    merged["variants"] = {label: variants[label] for label in sorted(variants)}
    return merged


def render_json(doc: Mapping[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode("utf-8")
