"""Walk a ``.hip_fatbin`` section bundle by bundle, parsing plain and ``CCOB`` bundles.

Private to :mod:`kpack.bundle`. :func:`walk` steps from bundle to bundle by header
arithmetic and one regular-expression match per gap of zero padding, so it runs in linear
time; what it does at each bundle is the caller's ``parse``. :func:`parse_at` is the one that
keeps the code objects: views into the caller's buffer for a plain bundle, and for a ``CCOB``
views into its payload, decompressed once into a buffer of exactly the declared size.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

from kpack.bundle._ccob import CCOB_MAGIC, decode, read_header
from kpack.bundle._model import Buffer, Bundle, CodeObject, IndexedBundle, target_or_none
from kpack.bundle._plain import PLAIN_MAGIC, Ctx, RawEntry, read_plain

log = logging.getLogger("kpack.bundle")  # the package's logger, as callers configure it

# Zero padding, then the next magic or the end of the buffer: one C-level match per gap.
_GAP = re.compile(rb"\x00*(?=__CLANG_OFFLOAD_BUNDLE__|CCOB|\Z)")
_NONZERO = re.compile(rb"[^\x00]")


def as_view(buf: Buffer) -> memoryview:
    view = memoryview(buf)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def _code_objects(
    view: memoryview, start: int, entries: list[RawEntry], ctx: Ctx, *, base: int
) -> list[CodeObject]:
    """Device entries of the bundle at ``start``; offsets reported relative to ``base``."""
    out: list[CodeObject] = []
    for entry in entries:
        if entry.triple.startswith("host"):
            continue
        target = target_or_none(entry.triple)
        if target is None:
            raise ctx.error(
                f"entry[{entry.number}].triple {entry.triple!r} has no valid target id "
                "(gfx<processor>[:feature±...])"
            )
        begin = start + entry.offset
        data = view[begin : begin + entry.size]
        out.append(CodeObject(entry.triple, target, begin - base, entry.size, data))
    return out


def _decoded_bundles(decoded: memoryview, ctx: Ctx) -> list[CodeObject]:
    """Code objects of the one or more plain bundles a CCOB payload decodes to."""
    out: list[CodeObject] = []
    pos = count = 0
    payload_ctx = Ctx(ctx.name, f"{ctx.label}, decoded payload")
    while True:
        pos = _skip_gap(decoded, pos, payload_ctx)
        if pos == len(decoded):
            break
        sub = Ctx(ctx.name, f"{ctx.label}, decoded bundle at {pos:#x}")
        if decoded[pos : pos + 4] == CCOB_MAGIC:
            raise sub.error("a CCOB payload must decode to plain bundles, found a nested CCOB")
        end, entries = read_plain(decoded, pos, sub)
        out += _code_objects(decoded, pos, entries, sub, base=0)
        pos = end
        count += 1
    if count == 0:
        raise ctx.error("CCOB payload holds no bundle")
    return out


def _parse_ccob(view: memoryview, offset: int, ctx: Ctx) -> Bundle:
    header = read_header(view, offset, ctx)
    end, decoded = decode(view, offset, header, ctx)
    log.debug(
        "%s: CCOB v%d %s at %#x: %d -> %d bytes",
        ctx.name,
        header.version,
        header.method,
        offset,
        end - offset,
        len(decoded),
    )
    code_objects = _decoded_bundles(memoryview(decoded).toreadonly(), ctx)
    return Bundle(offset, end, header.method, header.version, tuple(code_objects))


def parse_at(view: memoryview, offset: int, name: str) -> Bundle:
    ctx = Ctx(name, f"bundle at offset {offset:#x}")
    if not 0 <= offset < len(view):
        raise ctx.error(f"offset is outside the buffer ({len(view)} bytes)")
    if view[offset : offset + 4] == CCOB_MAGIC:
        return _parse_ccob(view, offset, ctx)
    if view[offset : offset + len(PLAIN_MAGIC)] != PLAIN_MAGIC:
        head = bytes(view[offset : offset + 8])
        raise ctx.error(f"no bundle magic (__CLANG_OFFLOAD_BUNDLE__ or CCOB); starts {head!r}")
    end, entries = read_plain(view, offset, ctx)
    code_objects = _code_objects(view, offset, entries, ctx, base=offset)
    return Bundle(offset, end, None, None, tuple(code_objects))


def parse_bundle(buf: Buffer, offset: int = 0, *, name: str = "<buffer>") -> Bundle:
    """Parse the one bundle (plain or CCOB) that starts exactly at ``offset`` of ``buf``."""
    return parse_at(as_view(buf), offset, name)


def _skip_gap(view: memoryview, pos: int, ctx: Ctx) -> int:
    """Position of the next magic (or the end) after zero padding; garbage is an error."""
    match = _GAP.match(view, pos)
    if match is None:
        bad = _NONZERO.search(view, pos)
        at = bad.start() if bad else pos
        raise ctx.error(
            f"non-zero byte {view[at]:#04x} at {at:#x} between bundles (after {pos:#x}) "
            "is neither padding nor a bundle magic"
        )
    return match.end()


_B = TypeVar("_B", Bundle, IndexedBundle)


def walk(buf: Buffer, name: str, parse: Callable[[memoryview, int, str], _B]) -> Iterator[_B]:
    """Every bundle of a section in order, zero padding skipped, each parsed by ``parse``."""
    view = as_view(buf)
    pos = 0
    while True:
        pos = _skip_gap(view, pos, Ctx(name, f"section offset {pos:#x}"))
        if pos == len(view):
            return
        bundle = parse(view, pos, name)
        if bundle.end <= pos:  # cannot happen for a valid header; guarantees termination
            raise Ctx(name, f"bundle at offset {pos:#x}").error("bundle does not advance the walk")
        yield bundle
        pos = bundle.end


def iter_bundles(buf: Buffer, *, name: str) -> Iterator[Bundle]:
    """Walk a whole ``.hip_fatbin`` section: every bundle in order, zero padding skipped."""
    return walk(buf, name, parse_at)
