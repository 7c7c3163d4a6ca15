"""The command invocations of a CMake file, read by CMake's own grammar (cmake-language(7)).

Nothing is evaluated: no variables, no ``if()``, no ``include()``. What is read is exact,
though: a ``#`` inside a quoted argument is text, a bracket comment ``#[[ ... ]]`` hides
every line up to its end, a quoted argument may hold ``\\"`` and spans lines, command
names match whatever their case, and a call is only a name followed by ``(`` outside any
other call's parentheses (so ``function(name ...)`` does not call ``name``). Anything CMake
itself would refuse to parse — an unterminated quote, bracket or call, a ``)`` with no
``(`` — is an error naming the line, never read as something else.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from kpack.errors import RocmPackagingError

__all__ = ["CMakeCall", "cmake_calls"]

_SPACE = re.compile(r"[ \t\r\n]+")
_BRACKET_OPEN = re.compile(r"\[(=*)\[")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
# unquoted: escapes, and (CMake's legacy form) quoted runs inside a word, as in a"b c"d
_UNQUOTED = re.compile(r'(?:[^ \t\r\n()#"\\]|\\.|"(?:[^"\\]|\\.)*")+', re.DOTALL)

WORD, TEXT, OPEN, CLOSE = "word", "text", "(", ")"


@dataclass(frozen=True)
class CMakeCall:
    """One ``name(args...)`` call: ``name`` lower-cased (CMake commands ignore case), the
    arguments as written (quotes removed, nothing expanded), ``line`` where it starts."""

    name: str
    line: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class _Token:
    kind: str
    value: str
    line: int


class _Lexer:
    def __init__(
        self, text: str, source: str | os.PathLike[str], error: type[RocmPackagingError]
    ) -> None:
        self.text, self.source, self.error = text, source, error

    def fail(self, line: int, what: str) -> RocmPackagingError:
        return self.error(f"line {line}: {what}", path=self.source)

    def _bracket(self, opening: re.Match[str], line: int, what: str) -> tuple[str, int]:
        """The content of the bracket ``[=*[ ... ]=*]`` that ``opening`` found, and its end."""
        close = f"]{opening.group(1)}]"
        end = self.text.find(close, opening.end())
        if end < 0:
            raise self.fail(line, f"unterminated bracket {what} (no closing {close})")
        return self.text[opening.end() : end], end + len(close)

    def _comment_end(self, at: int, line: int) -> int:
        opening = _BRACKET_OPEN.match(self.text, at + 1)
        if opening is not None:
            return self._bracket(opening, line, "comment")[1]
        newline = self.text.find("\n", at)
        return len(self.text) if newline < 0 else newline

    def _argument(self, at: int, line: int) -> tuple[_Token, int]:
        text, char = self.text, self.text[at]
        opening = _BRACKET_OPEN.match(text, at) if char == "[" else None
        if opening is not None:
            value, end = self._bracket(opening, line, "argument")
            return _Token(TEXT, value, line), end
        if char == '"':
            quoted = _QUOTED.match(text, at)
            if quoted is None:
                raise self.fail(line, 'unterminated quoted argument (no closing ")')
            return _Token(TEXT, quoted.group(1), line), quoted.end()
        word = _UNQUOTED.match(text, at)
        if word is None:
            raise self.fail(line, "a backslash at the end of the file")
        return _Token(WORD, word.group(0), line), word.end()

    def tokens(self) -> Iterator[_Token]:
        text, at, line = self.text, 0, 1
        while at < len(text):
            char = text[at]
            space = _SPACE.match(text, at)
            if space is not None:
                end = space.end()
            elif char == "#":
                end = self._comment_end(at, line)
            elif char in "()":
                yield _Token(char, char, line)
                end = at + 1
            else:
                token, end = self._argument(at, line)
                yield token
            line += text.count("\n", at, end)
            at = end


def cmake_calls(
    text: str, *, source: str | os.PathLike[str], error: type[RocmPackagingError]
) -> list[CMakeCall]:
    """Every top-level command call of ``text``, in order; ``error`` naming ``source`` and
    the line for text CMake would not parse."""
    lexer = _Lexer(text, source, error)
    calls: list[CMakeCall] = []
    name: _Token | None = None  # the word just before, at the top level
    depth, start = 0, _Token(WORD, "", 0)
    args: list[str] = []
    for token in lexer.tokens():
        if depth == 0:
            if token.kind == CLOSE:
                raise lexer.fail(token.line, "')' without a matching '('")
            if token.kind == OPEN:
                depth, args, start = 1, [], name or _Token(WORD, "", token.line)
            name = token if token.kind == WORD else None
            continue
        depth += {OPEN: 1, CLOSE: -1}.get(token.kind, 0)
        if depth == 0:
            calls.append(CMakeCall(start.value.lower(), start.line, tuple(args)))
            name = None
        else:
            args.append(token.value)
    if depth:
        raise lexer.fail(start.line, f"the call {start.value or '(...)'}( is never closed")
    return calls
