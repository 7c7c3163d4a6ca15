"""Damaged and hostile wheels given to the wheel splitter: one PackagingError naming the wheel
(and the member), nothing written, no escaping zipfile exception, no unbounded inflation."""

from __future__ import annotations

import base64
import hashlib
import re
import struct
import subprocess
import sys
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpack import cli
from kpack import wheelsplit as spw
from kpack.errors import PackagingError
from kpack.wheelfile import _source as _wheel_source
from kpack.wheelfile._source import Limits
from tests.kpack.wheel_fixtures import make_plain_wheel, record_name, rewrite_zip
from tests.kpack.wheelsplit.test_wheelsplit import _assert_no_output, _options

NAME = "torch-2.9.0-py3-none-linux_x86_64.whl"
REPO = Path(__file__).resolve().parents[3]


#: a progress line of a CI log
PROGRESS = re.compile(r"^\[ *\d+\.\ds\] ")


def _without_progress(err: str) -> str:
    """stderr without a CI log's progress lines (kpack.common.progress), which precede an
    error line."""
    return "".join(line for line in err.splitlines(keepends=True) if not PROGRESS.match(line))


@pytest.fixture(autouse=True, params=["inline", "read-ahead"])
def inflate(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test twice: members inflated inline, and (as large members are) on a second
    thread, which must stop with the failure and leave no thread behind."""
    if request.param == "read-ahead":
        monkeypatch.setattr(_wheel_source, "_READ_AHEAD_MIN", 0)
    yield
    assert not [t for t in threading.enumerate() if t.name == "wheel-inflate"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_plain_wheel(tmp_path_factory.mktemp("plain")).read_bytes()


def _fails(tmp_path: Path, data: bytes, *needles: str, **options: object) -> str:
    wheel = tmp_path / NAME
    wheel.write_bytes(data)
    out = tmp_path / "out"
    with pytest.raises(PackagingError) as info:
        spw.split_wheel(wheel, out, _options(**options))
    text = str(info.value)
    assert NAME in text
    for needle in needles:
        assert needle in text, text
    _assert_no_output(out)
    return text


def _zip(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A wheel-shaped zip (a .dist-info, no valid RECORD) with ``members`` first."""
    import io

    info = "torch-2.9.0.dist-info"
    dist = [(f"{info}/METADATA", b"Name: torch\n"), (f"{info}/WHEEL", b""), (f"{info}/RECORD", b"")]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in [*members, *dist]:
            zinfo = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            zinfo.compress_type = method
            zf.writestr(zinfo, data)
    return buf.getvalue()


def _cd_offset(data: bytes) -> int:
    eocd = data.rindex(b"PK\x05\x06")
    return int(struct.unpack_from("<I", data, eocd + 16)[0])


def _patch_cd(data: bytes, field: int, fmt: str, value: int) -> bytes:
    """Patch a field of the first central-directory header."""
    out = bytearray(data)
    struct.pack_into(fmt, out, _cd_offset(data) + field, value)
    return bytes(out)


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9, 0.99])
def test_truncated(plain: bytes, tmp_path: Path, cut: float) -> None:
    _fails(tmp_path, plain[: int(len(plain) * cut)], "damaged wheel")


def test_corrupt_local_header(plain: bytes, tmp_path: Path) -> None:
    data = bytearray(plain)
    data[0:4] = b"PK\x09\x09"
    _fails(tmp_path, bytes(data), "damaged wheel")


def test_encrypted_member(plain: bytes, tmp_path: Path) -> None:
    _fails(tmp_path, _patch_cd(plain, 8, "<H", 0x1), "encrypted member")


@pytest.mark.parametrize("method", [1, 12, 14, 99])
def test_unsupported_compression(plain: bytes, tmp_path: Path, method: int) -> None:
    _fails(tmp_path, _patch_cd(plain, 10, "<H", method), f"compression method {method}")


def test_bad_crc(plain: bytes, tmp_path: Path) -> None:
    _fails(tmp_path, _patch_cd(plain, 16, "<I", 0xDEADBEEF), "damaged wheel", "CRC")


@pytest.mark.parametrize("delta", [-5, +5, 1 << 20])
def test_declared_size_lies(plain: bytes, tmp_path: Path, delta: int) -> None:
    size = struct.unpack_from("<I", plain, _cd_offset(plain) + 24)[0]
    _fails(tmp_path, _patch_cd(plain, 24, "<I", size + delta), "torch/__init__.py")


def test_bad_deflate_stream(tmp_path: Path) -> None:
    data = bytearray(_zip([("torch/x.py", bytes(range(256)) * 100)]))
    data[30 + len("torch/x.py") + 2] ^= 0xFF  # inside the compressed data
    _fails(tmp_path, bytes(data), "damaged wheel")


def test_non_utf8_name(plain: bytes, tmp_path: Path) -> None:
    data = bytearray(plain)
    cd = _cd_offset(plain)
    struct.pack_into("<H", data, cd + 8, 0x800)  # names are UTF-8 ...
    data[cd + 46] = 0xFF  # ... but this one is not
    _fails(tmp_path, bytes(data), "damaged wheel: member name '\\xfforch/", "is not valid UTF-8")


def test_non_utf8_name_without_the_utf8_flag(tmp_path: Path) -> None:
    """zipfile reads a name without the UTF-8 flag as cp437 (any bytes pass); the wheel
    format says names are UTF-8, so bytes that are not are refused, naming the member."""
    data = _zip([("torch/badX.py", b"x")])
    assert data.count(b"torch/badX.py") == 2  # the local header and the central directory
    _fails(
        tmp_path,
        data.replace(b"badX", b"bad\xff"),
        "member name 'torch/bad\\xff.py'",
        "is not valid UTF-8",
    )


@pytest.mark.parametrize(
    "name", ["../evil.py", "/etc/evil", "torch/../../evil", "C:/evil.py", "torch\\evil.py", "a//b"]
)
def test_unsafe_member_names(tmp_path: Path, name: str) -> None:
    data = _zip([("torch/__init__.py", b""), (name, b"evil")])
    _fails(tmp_path, data, "unsafe member name")
    assert not (tmp_path.parent / "evil.py").exists() and not (tmp_path / "evil.py").exists()


def test_an_empty_member_name(tmp_path: Path) -> None:
    """Fuzzer finding: zipfile's ``is_dir()`` fails on an empty name (an IndexError, reported
    as 'damaged wheel: IndexError'); it is an unsafe name like any other."""
    data = _zip([("torch/__init__.py", b""), ("", b"x")])
    _fails(tmp_path, data, "invalid wheel members", "'': unsafe member name (member name is empty)")


def test_duplicate_members(tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it writes
        data = _zip([("torch/__init__.py", b"a"), ("torch/__init__.py", b"b")])
    _fails(tmp_path, data, "duplicate member")


def test_a_bomb_is_refused_before_extracting(tmp_path: Path) -> None:
    bomb = _zip([("torch/__init__.py", b""), ("torch/zeros.bin", bytes(64 << 20))])
    assert len(bomb) < 200_000
    text = _fails(
        tmp_path, bomb, "would expand too far", "torch/zeros.bin", "--max-expansion-ratio"
    )
    assert "1000:1" in text


def test_total_size_limit(plain: bytes, tmp_path: Path) -> None:
    _fails(
        tmp_path, plain, "would expand too far", "--max-unpacked-size",
        limits=Limits(max_total=100),
    )  # fmt: skip


def test_cli_options_raise_the_limits_and_errors_are_one_line(tmp_path: Path) -> None:
    bomb = tmp_path / NAME
    bomb.write_bytes(_zip([("torch/__init__.py", b""), ("torch/zeros.bin", bytes(8 << 20))]))
    base = [sys.executable, "-m", "kpack", "split-wheel", "--input", str(bomb),
            "--overlay-root", "torch/", "--device-package-prefix", "amd-torch-device"]  # fmt: skip
    proc = subprocess.run(
        [*base, "--output-dir", str(tmp_path / "a")], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 1
    lines = _without_progress(proc.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "would expand too far" in lines[0]
    proc = subprocess.run(
        [*base, "--output-dir", str(tmp_path / "b"), "--max-expansion-ratio", "100000"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    # past the size limits, the (unsigned) wheel fails its RECORD check, not the limits
    assert proc.returncode == 1 and "RECORD" in proc.stderr and "expand" not in proc.stderr


@settings(
    max_examples=150,
    deadline=2000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_wheels_raise_only_our_error(
    plain: bytes, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    buf = bytearray(plain)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(buf) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        buf = buf[: data.draw(st.integers(0, len(buf)))]
    tmp = tmp_path_factory.mktemp("mut")
    wheel = tmp / NAME
    wheel.write_bytes(bytes(buf))
    try:
        spw.split_wheel(wheel, tmp / "out", _options())
    except PackagingError:
        assert not (tmp / "out").exists()
    assert not [p for p in tmp.iterdir() if p.name.startswith(".out.")]


def test_zlib_level_sanity() -> None:
    # the bomb fixture above relies on deflate compressing zeros about 1000:1
    assert len(zlib.compress(bytes(64 << 20), 6)) < (64 << 20) // 900


# --- RECORD hash fields -----------------------------------------------------------------------

MEMBER = "torch/__init__.py"
SPLIT = ["split-wheel", "--overlay-root", "torch/", "--device-package-prefix", "amd-torch-device"]


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


def _with_hash(plain: bytes, tmp_path: Path, hash_field: Callable[[bytes], str]) -> bytes:
    """``plain`` with MEMBER's RECORD hash field replaced by ``hash_field(member bytes)``."""
    source = tmp_path / "source.whl"
    source.write_bytes(plain)

    def edit(members: dict[str, bytes]) -> dict[str, bytes]:
        name = record_name(members)
        rows = [line.split(",") for line in members[name].decode().splitlines()]
        field = hash_field(members[MEMBER])
        rows = [[r[0], field, r[2]] if r[0] == MEMBER else r for r in rows]
        members[name] = "".join(",".join(r) + "\n" for r in rows).encode()
        return members

    return rewrite_zip(source, tmp_path / "edited.whl", edit).read_bytes()


def _digest(algorithm: str, data: bytes, size: int | None = None) -> str:
    h = hashlib.new(algorithm, data)
    raw = h.digest(size) if size is not None else h.digest()  # type: ignore[call-arg]
    return f"{algorithm}=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("algorithm", "size"),
    [
        ("shake_128", 32),
        ("shake_256", 64),
        ("md5", None),
        ("sha1", None),
        ("sha224", None),
        ("whirlpool", None),
        ("", None),
    ],
)
def test_unsupported_record_hash(plain: bytes, tmp_path: Path, algorithm: str, size: int) -> None:
    if algorithm in hashlib.algorithms_guaranteed:
        data = _with_hash(plain, tmp_path, lambda b: _digest(algorithm, b, size))
    else:
        data = _with_hash(plain, tmp_path, lambda b: f"{algorithm}=" + "A" * 43)
    problem = f"{MEMBER}: hash algorithm {algorithm!r} is not allowed"
    _fails(tmp_path, data, "bad RECORD", problem, "(use blake2b, blake2s, sha256, sha384")


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        ("sha256=AAAA", "malformed sha256 digest 'AAAA' (3 bytes, sha256 has 32)"),
        ("sha256=" + "A" * 42, "(31 bytes, sha256 has 32)"),
        ("sha512=" + "A" * 43, "(32 bytes, sha512 has 64)"),
        ("sha256=" + "+" * 43, "not urlsafe base64"),
        ("sha256=" + "A" * 41, "not urlsafe base64"),
        ("sha256=" + "\u00e9" * 43, "not urlsafe base64"),
        ("sha256=", "malformed sha256 digest ''"),
    ],
)
def test_malformed_record_digest(plain: bytes, tmp_path: Path, field: str, problem: str) -> None:
    _fails(tmp_path, _with_hash(plain, tmp_path, lambda b: field), f"{MEMBER}: ", problem)


@pytest.mark.parametrize("algorithm", ["sha512", "sha384", "sha3_256", "blake2b", "blake2s"])
def test_strong_record_hashes_verify(plain: bytes, tmp_path: Path, algorithm: str) -> None:
    wheel = tmp_path / NAME
    wheel.write_bytes(_with_hash(plain, tmp_path, lambda b: _digest(algorithm, b)))
    report = spw.split_wheel(wheel, tmp_path / "out", _options())
    assert report.unchanged
    wrong = _with_hash(plain, tmp_path, lambda b: _digest(algorithm, b + b"x"))
    _fails(tmp_path / "out", wrong, f"{MEMBER}: {algorithm} mismatch (RECORD ")


def test_shake_record_hash_on_the_command_line(
    plain: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = tmp_path / "in" / NAME
    wheel.parent.mkdir()
    wheel.write_bytes(_with_hash(plain, tmp_path, lambda b: _digest("shake_128", b, 32)))
    before = _snapshot(tmp_path)
    rc = cli.main([*SPLIT, "--input", str(wheel), "--output-dir", str(tmp_path / "out")])
    err = _without_progress(capsys.readouterr().err)
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith(f"error: {wheel}: bad RECORD ("), err
    assert f"{MEMBER}: hash algorithm 'shake_128' is not allowed" in err
    assert _snapshot(tmp_path) == before


# --- names of a Windows wheel -----------------------------------------------------------------

WIN = "torch-2.9.0-py3-none-win_amd64.whl"


def _wheel_with(tmp_path: Path, tag: str, members: list[tuple[str, bytes]]) -> Path:
    """A wheel of ``members`` named with ``tag`` (written as a Linux wheel: our writer
    refuses such names in a Windows one)."""
    from kpack.wheelfile import Member, write_wheel
    from tests.kpack.wheel_fixtures import metadata

    result = write_wheel(
        tmp_path / tag,
        dist_name="torch",
        version="2.9.0",
        tag="py3-none-linux_x86_64",
        members=[Member(name, data) for name, data in members],
        metadata=metadata(),
    )
    return result.path.rename(result.path.with_name(f"torch-2.9.0-{tag}.whl"))


@pytest.mark.parametrize(
    ("members", "pair"),
    [
        ([("torch/Foo.py", b"a"), ("torch/foo.py", b"b")], "'torch/Foo.py' and 'torch/foo.py'"),
        ([("torch/A/x.py", b"a"), ("torch/a/y.py", b"b")], "'torch/A' and 'torch/a'"),
        ([("Torch/x.py", b"a"), ("torch/y.py", b"b")], "'Torch' and 'torch'"),
    ],
)
def test_names_differing_only_in_case_in_a_windows_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], members: list[tuple[str, bytes]], pair: str
) -> None:
    wheel = _wheel_with(tmp_path, "py3-none-win_amd64", members)
    before = _snapshot(tmp_path)
    rc = cli.main([*SPLIT, "--input", str(wheel), "--output-dir", str(tmp_path / "out")])
    err = _without_progress(capsys.readouterr().err)
    assert rc == 1
    assert (
        err == f"error: {wheel}: invalid wheel members; {pair} differ only in case (one "
        "file on Windows)\n"
    )
    assert _snapshot(tmp_path) == before
    # the same members in a Linux wheel are fine (a case-sensitive file system holds both)
    linux = _wheel_with(tmp_path, "py3-none-linux_x86_64", members)
    report = spw.split_wheel(linux, tmp_path / "linux", _options())
    assert report.unchanged
    assert (tmp_path / "linux" / linux.name).read_bytes() == linux.read_bytes()
