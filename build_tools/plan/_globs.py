"""TheRock's anchored glob dialect for install relpaths.

* ``**`` spans any number of directories (including none);
* ``*`` matches any run of characters within one path segment;
* ``?`` ALSO matches any run of characters within one segment — not exactly one
  character. This is TheRock's behaviour and we keep it so that descriptor patterns
  mean the same thing here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["GlobSet", "compile_glob"]


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile one pattern to an anchored regular expression."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**", i):
            at_start = i == 0 or pattern[i - 1] == "/"
            followed_by_slash = pattern.startswith("/", i + 2)
            if at_start and followed_by_slash:
                out.append("(?:[^/]+/)*")  # '**/' : zero or more whole directories
                i += 3
                continue
            if at_start and i + 2 == n:
                if out and out[-1] == "/":
                    out[-1] = "(?:/.*)?"  # trailing '/**': the directory itself or below
                else:
                    out.append(".*")
                i += 2
                continue
            out.append(".*")
            i += 2
        elif pattern[i] in "*?":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "/":
            out.append("/")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass(frozen=True)
class GlobSet:
    """A set of patterns; ``matches`` is true if any pattern matches the relpath."""

    patterns: tuple[str, ...]

    @classmethod
    def of(cls, patterns: Iterable[str]) -> GlobSet:
        return cls(tuple(patterns))

    def matches(self, relpath: str) -> bool:
        return any(compile_glob(p).match(relpath) for p in self.patterns)
