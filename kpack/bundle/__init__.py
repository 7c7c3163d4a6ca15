"""HIP offload bundles: parse and write plain ``__CLANG_OFFLOAD_BUNDLE__`` and ``CCOB`` bundles.

A ``.hip_fatbin`` section holds one bundle per translation unit, possibly separated by zero
padding (kpack.md §2). :func:`iter_bundles` walks such a section by header arithmetic and one
regular-expression match per gap, so it runs in linear time and, for plain bundles, never
copies code-object bytes: :attr:`CodeObject.data` is a view into the caller's buffer (an
``mmap`` keeps the walk of a 1.3 GB library to a few pages of memory). Compressed bundles are
decompressed once, into a buffer of exactly the declared size.

Every malformed input raises :class:`kpack.errors.BundleError` naming the buffer, the bundle
offset and the field.
"""

from __future__ import annotations

import logging
import mmap
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kpack.bundle import _ccob as _bundle_ccob
from kpack.bundle import _plain as _bundle_plain
from kpack.bundle._plain import _ENTRY, HEADER_FIXED, Ctx, RawEntry
from kpack.errors import BundleError
from kpack.targets import is_target_id

__all__ = [
    "CCOB_MAGIC",
    "MAX_UNCOMPRESSED",
    "PLAIN_MAGIC",
    "Bundle",
    "BundleSink",
    "CodeObject",
    "CodeObjectRef",
    "IndexedBundle",
    "Sink",
    "index_bundles",
    "is_target_id",
    "iter_bundles",
    "make_ccob",
    "make_plain_bundle",
    "parse_bundle",
    "stream_code_objects",
    "target_of",
]

log = logging.getLogger(__name__)

PLAIN_MAGIC = _bundle_plain.PLAIN_MAGIC
CCOB_MAGIC = _bundle_ccob.CCOB_MAGIC
MAX_UNCOMPRESSED = _bundle_ccob.MAX_UNCOMPRESSED
DEFAULT_HOST_TRIPLE = "host-x86_64-unknown-linux-gnu-"

# Zero padding, then the next magic or the end of the buffer: one C-level match per gap.
_GAP = re.compile(rb"\x00*(?=__CLANG_OFFLOAD_BUNDLE__|CCOB|\Z)")
_NONZERO = re.compile(rb"[^\x00]")

Buffer = bytes | bytearray | memoryview | mmap.mmap


@dataclass(frozen=True)
class CodeObject:
    """One device code object of a bundle."""

    triple: str  # full bundle triple, e.g. 'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+'
    target: str  # target id, e.g. 'gfx90a:xnack+'
    offset: int  # payload offset within the decoded bundle bytes
    size: int
    data: bytes | memoryview  # a zero-copy view for plain bundles


@dataclass(frozen=True)
class Bundle:
    """One bundle of a ``.hip_fatbin`` section: where it lies and its device code objects."""

    offset: int
    end: int  # exclusive
    compression: str | None  # None, 'zstd' or 'zlib'
    ccob_version: int | None
    code_objects: tuple[CodeObject, ...]  # host entries skipped


def _target_or_none(triple: str) -> str | None:
    if "--" in triple:
        target = triple.rpartition("--")[2]
    else:
        fields = triple.split("-")
        starts = [i for i, f in enumerate(fields) if f.startswith("gfx")]
        if not starts:
            return None
        target = "-".join(fields[starts[-1] :])
    return target if is_target_id(target) else None


def target_of(triple: str) -> str:
    """Target id of a bundle triple: the text after the last ``--``.

    Legacy single-dash triples (``hip-amdgcn-amd-amdhsa-gfx906``) are parsed too: the target
    starts at the last ``-`` field that begins with ``gfx``. A triple without a valid target
    id (see :func:`is_target_id`) is a :class:`BundleError`, never silently dropped.
    """
    target = _target_or_none(triple)
    if target is None:
        raise BundleError(f"no valid target id in bundle triple {triple!r}")
    return target


def _as_view(buf: Buffer) -> memoryview:
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
        target = _target_or_none(entry.triple)
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
        end, entries = _bundle_plain.read_plain(decoded, pos, sub)
        out += _code_objects(decoded, pos, entries, sub, base=0)
        pos = end
        count += 1
    if count == 0:
        raise ctx.error("CCOB payload holds no bundle")
    return out


def _parse_ccob(view: memoryview, offset: int, ctx: Ctx) -> Bundle:
    header = _bundle_ccob.read_header(view, offset, ctx)
    end, decoded = _bundle_ccob.decode(view, offset, header, ctx)
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


def _parse(view: memoryview, offset: int, name: str) -> Bundle:
    ctx = Ctx(name, f"bundle at offset {offset:#x}")
    if not 0 <= offset < len(view):
        raise ctx.error(f"offset is outside the buffer ({len(view)} bytes)")
    if view[offset : offset + 4] == CCOB_MAGIC:
        return _parse_ccob(view, offset, ctx)
    if view[offset : offset + len(PLAIN_MAGIC)] != PLAIN_MAGIC:
        head = bytes(view[offset : offset + 8])
        raise ctx.error(f"no bundle magic (__CLANG_OFFLOAD_BUNDLE__ or CCOB); starts {head!r}")
    end, entries = _bundle_plain.read_plain(view, offset, ctx)
    code_objects = _code_objects(view, offset, entries, ctx, base=offset)
    return Bundle(offset, end, None, None, tuple(code_objects))


def parse_bundle(buf: Buffer, offset: int = 0, *, name: str = "<buffer>") -> Bundle:
    """Parse the one bundle (plain or CCOB) that starts exactly at ``offset`` of ``buf``."""
    return _parse(_as_view(buf), offset, name)


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


_B = TypeVar("_B", "Bundle", "IndexedBundle")


def _walk(buf: Buffer, name: str, parse: Callable[[memoryview, int, str], _B]) -> Iterator[_B]:
    """Every bundle of a section in order, zero padding skipped, each parsed by ``parse``."""
    view = _as_view(buf)
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
    return _walk(buf, name, _parse)


# --- indexing without keeping decoded bytes --------------------------------------------------


@dataclass(frozen=True)
class CodeObjectRef:
    """Where one device code object lies: ``data`` is a zero-copy view for a plain bundle and
    ``None`` inside a compressed one (read it with :func:`stream_code_objects`)."""

    triple: str
    target: str
    offset: int  # payload offset within the decoded bundle bytes
    size: int
    data: memoryview | None


@dataclass(frozen=True)
class IndexedBundle:
    """A bundle whose structure was checked in full, without keeping decoded bytes."""

    offset: int
    end: int
    compression: str | None
    ccob_version: int | None
    code_objects: tuple[CodeObjectRef, ...]


#: Called once per device code object: a ``write`` for its bytes, or ``None`` to skip it.
Sink = Callable[[CodeObjectRef], Callable[[bytes | memoryview], object] | None]
#: A :data:`Sink` that also learns the section offset of the bundle the object is in.
BundleSink = Callable[[int, CodeObjectRef], Callable[[bytes | memoryview], object] | None]


class _ChunkReader:
    """Forward-only reads over a stream of chunks, with the absolute position."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buf = b""
        self._off = 0
        self.pos = 0

    def _more(self) -> bool:
        while self._off >= len(self._buf):
            nxt = next(self._chunks, None)
            if nxt is None:
                return False
            self._buf, self._off = nxt, 0
        return True

    def peek(self, n: int) -> bytes:
        while len(self._buf) - self._off < n:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            self._buf, self._off = self._buf[self._off :] + nxt, 0
        return self._buf[self._off : self._off + n]

    def copy(self, n: int, write: Callable[[bytes | memoryview], object] | None) -> int:
        """Pass the next ``n`` bytes to ``write`` (or drop them); return how many there were."""
        done = 0
        while done < n and self._more():
            take = min(n - done, len(self._buf) - self._off)
            if write is not None:
                write(memoryview(self._buf)[self._off : self._off + take])
            self._off += take
            done += take
        self.pos += done
        return done

    def read(self, n: int) -> bytes:
        parts: list[bytes] = []
        self.copy(n, lambda b: parts.append(bytes(b)))
        return b"".join(parts)

    def skip_zeros(self) -> bool:
        """Step over zero bytes; ``True`` if a non-zero byte follows, ``False`` at the end."""
        while self._more():
            chunk = self._buf
            stop = len(chunk) - len(chunk[self._off :].lstrip(b"\0"))
            if stop < len(chunk):
                self.pos += stop - self._off
                self._off = stop
                return True
            self.pos += len(chunk) - self._off
            self._off = len(chunk)
        return False


def _stream_entries(reader: _ChunkReader, avail: int, ctx: Ctx) -> tuple[int, list[RawEntry]]:
    head = reader.read(HEADER_FIXED)
    if len(head) < HEADER_FIXED:
        raise ctx.error(f"truncated header: {len(head)} bytes, need {HEADER_FIXED}")
    (count,) = _bundle_plain._COUNT.unpack_from(head, len(PLAIN_MAGIC))
    if count > (avail - HEADER_FIXED) // _ENTRY.size:
        raise ctx.error(
            f"num_entries {count} cannot fit in the {avail - HEADER_FIXED} bytes after the header"
        )
    pos = HEADER_FIXED
    entries: list[RawEntry] = []
    for index in range(count):
        record = reader.read(_ENTRY.size)
        if len(record) < _ENTRY.size:
            raise ctx.error(f"entry[{index}] record at +{pos:#x} runs past the end of the buffer")
        offset, size, triple_len = _ENTRY.unpack(record)
        pos += _ENTRY.size
        _bundle_plain.check_triple_len(index, triple_len, avail - pos, ctx)
        raw = reader.read(triple_len)
        triple = _bundle_plain._read_triple(memoryview(raw), 0, triple_len, index, ctx)
        pos += triple_len
        entries.append(_bundle_plain.checked_entry(index, triple, offset, size, avail, ctx))
    return pos, entries


def _device_ref(entry: RawEntry, start: int, ctx: Ctx) -> CodeObjectRef | None:
    if entry.triple.startswith("host"):
        return None
    target = _target_or_none(entry.triple)
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
    reader = _ChunkReader(chunks)
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
        _bundle_plain._check_layout(entries, header_end, sub)
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


def _index_ccob(view: memoryview, offset: int, ctx: Ctx, sink: Sink | None) -> IndexedBundle:
    header = _bundle_ccob.read_header(view, offset, ctx)
    decoding = _bundle_ccob.Decoding(view, offset, header, ctx)
    refs = _walk_decoded(decoding.chunks(), header.uncompressed_size, ctx, sink)
    if decoding.end is None:  # the stream was not exhausted: cannot happen after a full walk
        raise ctx.error("CCOB payload was not decoded to its end")
    return IndexedBundle(offset, decoding.end, header.method, header.version, tuple(refs))


def _index(view: memoryview, offset: int, name: str) -> IndexedBundle:
    ctx = Ctx(name, f"bundle at offset {offset:#x}")
    if view[offset : offset + 4] == CCOB_MAGIC:
        return _index_ccob(view, offset, ctx, None)
    plain = _parse(view, offset, name)
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
    if decoded is None:
        return _walk(buf, name, _index)

    def index(view: memoryview, offset: int, name: str) -> IndexedBundle:
        if view[offset : offset + 4] != CCOB_MAGIC:
            return _index(view, offset, name)
        ctx = Ctx(name, f"bundle at offset {offset:#x}")
        return _index_ccob(view, offset, ctx, lambda ref: decoded(offset, ref))

    return _walk(buf, name, index)


def stream_code_objects(
    buf: Buffer, bundle: IndexedBundle, *, name: str, sink: Sink, chunk: int = 1 << 20
) -> None:
    """Pass every device code object of ``bundle`` (from :func:`index_bundles` over the same
    ``buf``) to ``sink``, in chunks; a compressed bundle is decoded once, as a stream."""
    view = _as_view(buf)
    if bundle.compression is None:
        for ref in bundle.code_objects:
            write = sink(ref)
            if write is None or ref.data is None:
                continue
            for start in range(0, ref.size, chunk):
                write(ref.data[start : start + chunk])
        return
    _index_ccob(view, bundle.offset, Ctx(name, f"bundle at offset {bundle.offset:#x}"), sink)


def make_plain_bundle(
    entries: Sequence[tuple[str, bytes]],
    *,
    align: int = 4096,
    host_triple: str | None = DEFAULT_HOST_TRIPLE,
) -> bytes:
    """Write an uncompressed bundle: an empty host entry (unless None), then ``entries``.

    Each payload starts at a multiple of ``align`` from the bundle start; the bundle ends at
    the end of the last payload, as clang-offload-bundler lays them out.
    """
    return _bundle_plain.write_plain(entries, align=align, host_triple=host_triple)


def make_ccob(plain: bytes, *, version: int = 2, method: str = "zstd", level: int = 3) -> bytes:
    """Compress ``plain`` (one or more plain bundles) into a CCOB of ``version`` 1, 2 or 3.

    The hash field is the first 8 bytes of the MD5 of ``plain``; v1 has no total-size field.
    Invalid arguments raise :class:`ValueError`.
    """
    return _bundle_ccob.write_ccob(plain, version=version, method=method, level=level)
