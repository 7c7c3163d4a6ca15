"""Index a ``.hip_fatbin`` section without keeping decoded bytes, and stream its code objects.

Private to :mod:`kpack.bundle`. A compressed bundle is checked in full while it is decoded
as a stream, chunk by chunk (:class:`~kpack.bundle._chunks.ChunkReader`): the headers of the
plain bundles inside are read from the stream and each device code object goes to a
:data:`~kpack.bundle._model.Sink` as it passes, so memory stays at one chunk and one header
whatever the payload's size. Plain bundles need no decoding: their code objects are views.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import zstandard

from kpack.bundle._ccob import CCOB_MAGIC, Decoding, read_header
from kpack.bundle._chunks import ChunkReader
from kpack.bundle._model import (
    Buffer,
    BundleSink,
    CodeObjectRef,
    IndexedBundle,
    Sink,
    target_or_none,
)
from kpack.bundle._plain import (
    ENTRY,
    ENTRY_COUNT,
    HEADER_FIXED,
    PLAIN_MAGIC,
    Ctx,
    RawEntry,
    check_layout,
    check_triple_len,
    checked_entry,
    read_triple,
)
from kpack.bundle._walk import as_view, parse_at, walk


def _stream_entries(reader: ChunkReader, avail: int, ctx: Ctx) -> tuple[int, list[RawEntry]]:
    head = reader.read(HEADER_FIXED)
    if len(head) < HEADER_FIXED:
        raise ctx.error(f"truncated header: {len(head)} bytes, need {HEADER_FIXED}")
    (count,) = ENTRY_COUNT.unpack_from(head, len(PLAIN_MAGIC))
    if count > (avail - HEADER_FIXED) // ENTRY.size:
        raise ctx.error(
            f"num_entries {count} cannot fit in the {avail - HEADER_FIXED} bytes after the header"
        )
    pos = HEADER_FIXED
    entries: list[RawEntry] = []
    for index in range(count):
        record = reader.read(ENTRY.size)
        if len(record) < ENTRY.size:
            raise ctx.error(f"entry[{index}] record at +{pos:#x} runs past the end of the buffer")
        offset, size, triple_len = ENTRY.unpack(record)
        pos += ENTRY.size
        check_triple_len(index, triple_len, avail - pos, ctx)
        raw = reader.read(triple_len)
        triple = read_triple(memoryview(raw), 0, triple_len, index, ctx)
        pos += triple_len
        entries.append(checked_entry(index, triple, offset=offset, size=size, avail=avail, ctx=ctx))
    return pos, entries


def _device_ref(entry: RawEntry, start: int, ctx: Ctx) -> CodeObjectRef | None:
    if entry.triple.startswith("host"):
        return None
    target = target_or_none(entry.triple)
    if target is None:
        raise ctx.error(
            f"entry[{entry.number}].triple {entry.triple!r} has no valid target id "
            "(gfx<processor>[:feature±...])"
        )
    return CodeObjectRef(entry.triple, target, start + entry.offset, entry.size, None)


def _walk_decoded(
    chunks: Iterable[bytes], total: int, ctx: Ctx, sink: Sink | None
) -> list[CodeObjectRef]:
    """Check the plain bundles a CCOB payload decodes to, as a stream; pass code objects to
    ``sink``. Memory: one chunk and one bundle header, whatever the payload's size."""
    reader = ChunkReader(chunks)
    out: list[CodeObjectRef] = []
    count = 0
    payload_ctx = Ctx(ctx.name, f"{ctx.label}, decoded payload")
    while reader.skip_zeros():
        start = reader.pos
        sub = Ctx(ctx.name, f"{ctx.label}, decoded bundle at {start:#x}")
        head = reader.peek(len(PLAIN_MAGIC))
        if head[:4] == CCOB_MAGIC:
            raise sub.error("a CCOB payload must decode to plain bundles, found a nested CCOB")
        if head != PLAIN_MAGIC:
            raise payload_ctx.error(
                f"non-zero byte {head[0]:#04x} at {start:#x} between bundles is neither padding "
                "nor a bundle magic"
            )
        header_end, entries = _stream_entries(reader, total - start, sub)
        check_layout(entries, header_end, sub)
        end = max([header_end, *(e.offset + e.size for e in entries)])
        refs = {e.number: _device_ref(e, start, sub) for e in entries}
        for entry in sorted(entries, key=lambda e: (e.offset, e.number)):
            ref = refs[entry.number]
            write = sink(ref) if sink is not None and ref is not None else None
            if not entry.size:
                continue
            reader.copy(start + entry.offset - reader.pos, None)
            reader.copy(entry.size, write)
        reader.copy(start + end - reader.pos, None)
        out += [r for e in entries if (r := refs[e.number]) is not None]
        count += 1
    if count == 0:
        raise ctx.error("CCOB payload holds no bundle")
    return out


def _index_ccob(
    view: memoryview,
    offset: int,
    ctx: Ctx,
    sink: Sink | None,
    dctx: zstandard.ZstdDecompressor | None = None,
) -> IndexedBundle:
    header = read_header(view, offset, ctx)
    decoding = Decoding(view, offset, header, ctx, dctx)
    refs = _walk_decoded(decoding.chunks(), header.uncompressed_size, ctx, sink)
    if decoding.end is None:  # the stream was not exhausted: cannot happen after a full walk
        raise ctx.error("CCOB payload was not decoded to its end")
    return IndexedBundle(offset, decoding.end, header.method, header.version, tuple(refs))


def _index_plain(view: memoryview, offset: int, name: str) -> IndexedBundle:
    plain = parse_at(view, offset, name)
    refs = tuple(
        CodeObjectRef(c.triple, c.target, c.offset, c.size, memoryview(c.data))
        for c in plain.code_objects
    )
    return IndexedBundle(plain.offset, plain.end, None, None, refs)


def index_bundles(
    buf: Buffer, *, name: str, decoded: BundleSink | None = None
) -> Iterator[IndexedBundle]:
    """Walk a ``.hip_fatbin`` section like :func:`iter_bundles`, checking every bundle in
    full, but keep no decoded bytes: a compressed bundle is decoded as a stream, chunk by
    chunk. Its code objects go to ``decoded`` (with the bundle's offset) as they are
    decoded, if given, so that a caller that wants them need not decode again; else they
    are read again with :func:`stream_code_objects`. Plain bundles' code objects are
    zero-copy views (``CodeObjectRef.data``) and never go to ``decoded``."""
    # One decompressor for the walk (see Decoding): zstd decodes a CCOB's one-segment frame
    # into a window as large as the decoded payload (up to 108 MiB in jax-rocm10-pjrt) and
    # a decompressor keeps it for the next frame. A fresh one per bundle had the kernel
    # fault in all of it anew: 2.3 GB decoded in 45 bundles, about 600,000 minor faults and
    # 1.5 s of system time. The window goes with the walk.
    dctx = zstandard.ZstdDecompressor()

    def index(view: memoryview, offset: int, name: str) -> IndexedBundle:
        if view[offset : offset + 4] != CCOB_MAGIC:
            return _index_plain(view, offset, name)
        ctx = Ctx(name, f"bundle at offset {offset:#x}")
        sink = None if decoded is None else (lambda ref: decoded(offset, ref))
        return _index_ccob(view, offset, ctx, sink, dctx)

    return walk(buf, name, index)


def stream_code_objects(
    buf: Buffer, bundle: IndexedBundle, *, name: str, sink: Sink, chunk: int = 1 << 20
) -> None:
    """Pass every device code object of ``bundle`` (from :func:`index_bundles` over the same
    ``buf``) to ``sink``, in chunks; a compressed bundle is decoded once, as a stream."""
    view = as_view(buf)
    if bundle.compression is None:
        for ref in bundle.code_objects:
            write = sink(ref)
            if write is None or ref.data is None:
                continue
            for start in range(0, ref.size, chunk):
                write(ref.data[start : start + chunk])
        return
    _index_ccob(view, bundle.offset, Ctx(name, f"bundle at offset {bundle.offset:#x}"), sink)
