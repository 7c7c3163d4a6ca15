"""kpack.pe.imported_dlls against pefile on the real bitsandbytes win_amd64 wheel's DLLs."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pefile
import pytest

from kpack.errors import PeError
from kpack.pe import imported_dlls, read_image
from tests.pypi_inputs import BITSANDBYTES_WIN, pypi_wheel

pytestmark = pytest.mark.real


def test_imports_agree_with_pefile(tmp_path: Path) -> None:
    with zipfile.ZipFile(pypi_wheel(BITSANDBYTES_WIN)) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dll")]
        archive.extractall(tmp_path, names)
    assert len(names) > 10
    for name in names:
        path = tmp_path / name
        data = path.read_bytes()
        image = pefile.PE(str(path), fast_load=True)
        image.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
            ]
        )
        expected = [e.dll.decode() for e in getattr(image, "DIRECTORY_ENTRY_IMPORT", [])]
        expected += [e.dll.decode() for e in getattr(image, "DIRECTORY_ENTRY_DELAY_IMPORT", [])]
        assert list(imported_dlls(read_image(data, path), data)) == expected, name
        image.close()


def test_a_name_outside_the_file_is_an_error(tmp_path: Path) -> None:
    with zipfile.ZipFile(pypi_wheel(BITSANDBYTES_WIN)) as archive:
        data = bytearray(archive.read("bitsandbytes/libbitsandbytes_rocm72.dll"))
    path = tmp_path / "x.dll"
    image = read_image(bytes(data), path)
    rva, _ = image.directory(1)
    offset = image.rva_to_offset(rva, 20)
    assert offset is not None
    data[offset + 12 : offset + 16] = (0x7FFFFFF0).to_bytes(4, "little")
    with pytest.raises(PeError, match="imported DLL name at RVA 0x7ffffff0"):
        imported_dlls(read_image(bytes(data), path), bytes(data))
