"""A small, strict, bounded MessagePack decoder (standard library only).

Decodes the types that ``.kpack`` archives and ``.rocm_kpack_ref`` markers use: nil,
booleans, positive/negative fixint, uint8-64, int8-64, float32/64, fixstr/str8/16/32
(UTF-8), bin8/16/32, fixarray/array16/array32 and fixmap/map16/map32. Anything else
(ext types, the reserved byte 0xc1, invalid UTF-8, unhashable or duplicate map keys,
nesting deeper than ``max_depth``) and truncated input raise :class:`MsgpackError`; no
other exception escapes. A container may not claim more elements than bytes remain, so
memory use is bounded by the input size. Arrays decode to ``list``, maps to ``dict``,
``str`` to ``str`` and ``bin`` to ``bytes``.
"""

from __future__ import annotations

import struct

__all__ = ["DEFAULT_MAX_DEPTH", "MsgpackError", "unpack_one", "unpackb"]

DEFAULT_MAX_DEPTH = 32

_FIXED: dict[int, struct.Struct] = {
    0xCA: struct.Struct(">f"),
    0xCB: struct.Struct(">d"),
    0xCC: struct.Struct(">B"),
    0xCD: struct.Struct(">H"),
    0xCE: struct.Struct(">I"),
    0xCF: struct.Struct(">Q"),
    0xD0: struct.Struct(">b"),
    0xD1: struct.Struct(">h"),
    0xD2: struct.Struct(">i"),
    0xD3: struct.Struct(">q"),
}
_LENGTH = {1: struct.Struct(">B"), 2: struct.Struct(">H"), 4: struct.Struct(">I")}
# type byte -> (kind, size of its length field)
_SIZED = {
    0xC4: ("bin", 1),
    0xC5: ("bin", 2),
    0xC6: ("bin", 4),
    0xD9: ("str", 1),
    0xDA: ("str", 2),
    0xDB: ("str", 4),
    0xDC: ("array", 2),
    0xDD: ("array", 4),
    0xDE: ("map", 2),
    0xDF: ("map", 4),
}
_HASHABLE = (type(None), bool, int, float, str, bytes)


class MsgpackError(ValueError):
    """The bytes are not one well-formed MessagePack value of the supported types."""


class _Decoder:
    def __init__(self, data: bytes | bytearray | memoryview, max_depth: int) -> None:
        self.data = memoryview(data).cast("B")
        self.pos = 0
        self.max_depth = max_depth

    def take(self, n: int, what: str) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise MsgpackError(
                f"truncated: {what} needs {n} byte(s) at offset {self.pos}, "
                f"{len(self.data) - self.pos} left"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def length(self, size: int, what: str) -> int:
        (value,) = _LENGTH[size].unpack(self.take(size, f"{what} length"))
        return int(value)

    def count(self, n: int, per_item: int, what: str) -> int:
        left = len(self.data) - self.pos
        if n * per_item > left:
            raise MsgpackError(
                f"truncated: {what} of {n} element(s) at offset {self.pos}, "
                f"only {left} byte(s) left"
            )
        return n

    def value(self, depth: int) -> object:
        start = self.pos
        (byte,) = self.take(1, "type byte")
        if byte <= 0x7F:
            return byte
        if byte >= 0xE0:
            return byte - 0x100
        if 0xA0 <= byte <= 0xBF:
            return self.text(byte & 0x1F, start)
        if 0x90 <= byte <= 0x9F:
            return self.array(byte & 0x0F, depth, start)
        if 0x80 <= byte <= 0x8F:
            return self.map(byte & 0x0F, depth, start)
        if byte == 0xC0:
            return None
        if byte in (0xC2, 0xC3):
            return byte == 0xC3
        fixed = _FIXED.get(byte)
        if fixed is not None:
            (number,) = fixed.unpack(self.take(fixed.size, f"type {byte:#04x} payload"))
            return number
        sized = _SIZED.get(byte)
        if sized is None:
            raise MsgpackError(f"unsupported type byte {byte:#04x} at offset {start}")
        kind, size = sized
        n = self.length(size, kind)
        if kind == "bin":
            return bytes(self.take(n, "bin payload"))
        if kind == "str":
            return self.text(n, start)
        if kind == "array":
            return self.array(n, depth, start)
        return self.map(n, depth, start)

    def text(self, n: int, start: int) -> str:
        raw = self.take(n, "str payload")
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise MsgpackError(f"str at offset {start} is not valid UTF-8: {exc.reason}") from None

    def nested(self, depth: int, start: int) -> int:
        if depth >= self.max_depth:
            raise MsgpackError(f"nesting deeper than {self.max_depth} at offset {start}")
        return depth + 1

    def array(self, n: int, depth: int, start: int) -> list[object]:
        inner = self.nested(depth, start)
        return [self.value(inner) for _ in range(self.count(n, 1, "array"))]

    def map(self, n: int, depth: int, start: int) -> dict[object, object]:
        inner = self.nested(depth, start)
        out: dict[object, object] = {}
        for _ in range(self.count(n, 2, "map")):
            key_at = self.pos
            key = self.value(inner)
            if not isinstance(key, _HASHABLE):
                raise MsgpackError(f"map key at offset {key_at} is a {type(key).__name__}")
            if key in out:
                raise MsgpackError(f"duplicate map key {key!r} at offset {key_at}")
            out[key] = self.value(inner)
        return out


def unpack_one(
    data: bytes | bytearray | memoryview, *, max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[object, int]:
    """Decode the value at the start of ``data``; return it and the offset just past it."""
    decoder = _Decoder(data, max_depth)
    try:
        value = decoder.value(0)
    except RecursionError:  # only with a max_depth beyond the interpreter's limit
        raise MsgpackError("nesting too deep for this interpreter") from None
    return value, decoder.pos


def unpackb(
    data: bytes | bytearray | memoryview, *, max_depth: int = DEFAULT_MAX_DEPTH
) -> object:
    """Decode ``data``, which must hold exactly one value (no trailing bytes)."""
    value, end = unpack_one(data, max_depth=max_depth)
    if end != len(memoryview(data).cast("B")):
        raise MsgpackError(f"{len(memoryview(data).cast('B')) - end} byte(s) after the value")
    return value
