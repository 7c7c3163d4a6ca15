"""``--device-requires-dist``: extra ``Requires-Dist`` lines of the device wheels.

rocm-kpack's splitter takes templates such as ``rocm-sdk-device-@GFXARCH@ == 7.1`` (TheRock's
PyTorch workflows pass exactly that) and writes each one, ``@GFXARCH@`` replaced by the device
wheel's bundle key, into every device wheel's METADATA. A template naming ``@GFXARCH@`` names a
per-target package (TheRock publishes ``rocm-sdk-device-<target>`` for real targets only), so,
as rocm-kpack's splitter does, it goes only to device wheels of one real target (``gfx942``,
rocm-bootstrap's ``PackagingLevel.TARGET``): never to a sub-family, family or LLVM generic
target wheel (``gfx9_4``, ``gfx9``, ``gfx9-4-generic``), whose key names no such package. A
template without ``@GFXARCH@`` goes to every device wheel.

Every template is checked up front as a PEP 508 requirement (``packaging.requirements``) with
a sample key in place of ``@GFXARCH@``, and every expanded line again, so METADATA never holds
a line an installer refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from kpack.errors import UsageError
from kpack.wheelsplit._bundles import Level, level_of

__all__ = ["PLACEHOLDER", "check_requires", "device_requires"]

PLACEHOLDER = "@GFXARCH@"
_SAMPLE_KEY = "gfx942"
_MAX_SHOWN = 120


def _shown(text: str) -> str:
    cut = text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
    return repr(cut)


def _parse(line: str, template: str) -> None:
    if any(c in line for c in "\r\n\0"):
        raise UsageError(f"--device-requires-dist {_shown(template)}: holds a line break")
    # imported when a template is given: a split without one does not pay for the parser
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(line)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "invalid"
        raise UsageError(
            f"--device-requires-dist {_shown(template)}: not a PEP 508 requirement "
            f"({reason[:_MAX_SHOWN]})"
        ) from None


def check_requires(templates: Sequence[str]) -> tuple[str, ...]:
    """The templates, stripped, each a valid requirement once ``@GFXARCH@`` is replaced;
    the first bad one is a :class:`UsageError` naming it."""
    out = []
    for template in templates:
        text = template.strip()
        _parse(text.replace(PLACEHOLDER, _SAMPLE_KEY), template)
        out.append(text)
    return tuple(out)


def device_requires(templates: Sequence[str], key: str) -> list[str]:
    """The requirement lines of bundle ``key``'s device wheel, in the templates' order."""
    per_target = level_of(key) is Level.TARGET
    lines = []
    for template in templates:
        if PLACEHOLDER in template and not per_target:
            continue
        line = template.replace(PLACEHOLDER, key)
        _parse(line, template)
        lines.append(line)
    return lines
