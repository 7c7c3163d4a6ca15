"""Which code objects the ROCm runtime loads on a GPU of this machine.

The agent's ISA is the GPU's processor with its active features (``gfx90a:sramecc+:xnack-``,
:func:`_dist_info.agent_isa`). The loader matches a code object's target id against it
feature by feature: a feature the code object does not name is ``any``; one it names must
be the agent's (``gfx90a:xnack+`` loads only where xnack is on). It looks for the processor,
then for its LLVM generic target with the same features (kpack.md §7); the targets another
processor's packages own and KFD reports alike (``gfx1250-strict`` for gfx1250) count as the
processor's. A feature detection could not tell (sramecc of a forced ``gfx90a``) is tried
both ways: the GPU is taken to run either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from . import _dist_info as di
from ._kpack import base_target, candidate_targets

__all__ = ["Switch", "agent_isas", "features", "loads", "lookup_strings", "switches"]

#: the variable of the ROCm runtime that sets each feature, and its value for on / off
_SWITCH_ENV = {"xnack": di.XNACK_ENV, "sramecc": di.SRAMECC_ENV}
_SWITCH_VALUE = {"+": "1", "-": "0"}


def features(target: str) -> dict[str, str]:
    """The features a target id names: 'gfx90a:sramecc+:xnack-' -> {sramecc: +, xnack: -}."""
    return {f[:-1]: f[-1] for f in target.split(":")[1:] if f[-1:] in ("+", "-")}


def _with(isa: str, name: str, value: str) -> str:
    named = features(isa) | {name: value}
    return ":".join([base_target(isa), *(f"{k}{named[k]}" for k in sorted(named))])


def agent_isas(gpu: di.DetectedGpu) -> tuple[str, ...]:
    """The agent ISAs a detected GPU may run as: one, or one per value of each feature
    detection could not tell."""
    isas = [gpu.isa or gpu.target]
    for name in gpu.unknown:
        isas = [_with(isa, name, value) for isa in isas for value in "+-"]
    return tuple(isas)


def _owned(processor: str) -> list[str]:
    """The targets whose code ``processor``'s packages ship (``gfx1250-strict``)."""
    return sorted(t for t, owner in di.PACKAGE_OWNERS.items() if owner == processor)


def lookup_strings(isa: str) -> list[str]:
    """The target ids whose code objects load on an agent of ``isa``, in the runtime's
    order: the ISA's compatible strings, then its generic target's, then those of the
    targets its processor owns."""
    processor, _sep, named = isa.partition(":")
    strings = list(candidate_targets(isa))
    generic = di.generic_target(processor)
    others = [*([generic] if generic else []), *_owned(processor)]
    for other in others:
        spelled = f"{other}:{named}" if named else other
        strings += [s for s in candidate_targets(spelled) if s not in strings]
    return strings


def loads(code_target: str, isas: Iterable[str]) -> bool:
    """Whether a code object for ``code_target`` loads on an agent of any of ``isas``."""
    return any(code_target in lookup_strings(isa) for isa in isas)


@dataclass(frozen=True, kw_only=True)
class Switch:
    """A change of one feature of the agent that the user makes with a variable."""

    feature: str
    value: str  # '+' or '-'
    isas: tuple[str, ...]  # the agent ISAs it gives
    setting: str  # 'HSA_XNACK=1'
    forced: bool  # the feature was named by ROCM_BOOTSTRAP_FORCE_GFX_ARCH (taken as given)

    def text(self, gpu: di.DetectedGpu) -> str:
        """The command line that makes the runtime use the other value."""
        state = f"{self.feature} {'on' if self.value == '+' else 'off'}"
        if not self.forced:
            return f"it loads with {state}: run with {self.setting}"
        value = _with(gpu.isa or gpu.target, self.feature, self.value)
        return (
            f"it loads with {state} ({self.setting} on that GPU; check it with "
            f"{di.FORCE_GFX_ARCH_ENV}={value})"
        )


def switches(gpu: di.DetectedGpu) -> list[Switch]:
    """The feature changes the user can make for ``gpu``: each feature its agent has, to its
    other value (a forced value's feature only by forcing another value)."""
    given = features(gpu.target) if gpu.source == "forced" else {}
    current = features(agent_isas(gpu)[0])
    out = []
    for name in sorted(current):
        if name in gpu.unknown:
            continue
        value = "+" if current[name] == "-" else "-"
        isas = tuple(_with(isa, name, value) for isa in agent_isas(gpu))
        setting = f"{_SWITCH_ENV[name]}={_SWITCH_VALUE[value]}"
        out.append(Switch(feature=name, value=value, isas=isas, setting=setting,
                          forced=name in given))  # fmt: skip
    return out
