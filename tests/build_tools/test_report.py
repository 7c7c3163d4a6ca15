"""What each GPU user downloads (``build_tools.report.target_rows``)."""

from __future__ import annotations

from build_tools.report import Report, render_markdown, target_rows


def test_each_processor_counts_its_own_and_its_generic_wheel() -> None:
    devices = [
        ("gfx942", "rocm_sdk_device_gfx942-7.1-py3-none-linux_x86_64.whl", 300),
        ("gfx9-4-generic", "rocm_sdk_device_gfx9_4_generic-7.1-py3-none-linux_x86_64.whl", 50),
        ("gfx90a", "rocm_sdk_device_gfx90a-7.1-py3-none-linux_x86_64.whl", 200),
    ]
    rows = {r.target: r for r in target_rows(1000, devices)}
    # gfx940/gfx941/gfx950 are LLVM members of gfx9-4-generic without their own wheel
    assert set(rows) == {"gfx940", "gfx941", "gfx942", "gfx950", "gfx90a"}
    assert rows["gfx942"].download_bytes == 1350
    assert rows["gfx942"].device_wheels == (devices[0][1], devices[1][1])
    assert rows["gfx950"].download_bytes == 1050
    assert rows["gfx90a"].download_bytes == 1200
    assert {r.fat_download_bytes for r in rows.values()} == {1550}
    assert rows["gfx90a"].saving == round(1 - 1200 / 1550, 4)
    text = render_markdown(Report("7.1", "kpack", (), tuple(rows.values()), ()))
    assert "| gfx942 | rocm-sdk-device-gfx942, rocm-sdk-device-gfx9-4-generic |" in text


def test_no_device_wheels_no_rows() -> None:
    assert target_rows(1000, []) == ()
