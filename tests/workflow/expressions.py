"""GitHub Actions expressions, as far as ``rocm-python-packages.yml`` uses them: property
paths into the contexts (``inputs.version``, ``matrix.shard.files``,
``needs.plan.outputs.shards``), string, number and boolean literals, ``==``, ``!=``, ``!``,
``&&``, ``||``, parentheses, ``toJSON()`` and ``fromJSON()``. Anything else is an error, so
a workflow using more fails its simulation instead of being run differently."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ExpressionError", "evaluate", "interpolate", "to_text"]

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!().,])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)
_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class ExpressionError(Exception):
    """An expression this evaluator does not know (or a path that leads nowhere)."""


def interpolate(text: str, contexts: Mapping[str, Any]) -> str:
    """``text`` with every ``${{ expr }}`` replaced by its value as text."""
    return _TEMPLATE.sub(lambda m: to_text(evaluate(m.group(1), contexts)), text)


def evaluate(text: str, contexts: Mapping[str, Any]) -> Any:
    """The value of one expression (``${{ }}`` around it is optional)."""
    whole = _TEMPLATE.fullmatch(text.strip())
    parser = _Parser(whole.group(1) if whole else text, contexts)
    value = parser.expr()
    parser.expect(None)
    return value


def to_text(value: Any) -> str:
    """An expression's value where text is needed (env values, names)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2)
    return str(value)


class _Parser:
    def __init__(self, text: str, contexts: Mapping[str, Any]) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos, text = 0, text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ExpressionError(f"cannot read {text[pos:]!r}")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.contexts = contexts

    def peek(self) -> str | None:
        return self.tokens[0][1] if self.tokens else None

    def expect(self, token: str | None) -> None:
        if self.peek() != token:
            raise ExpressionError(f"expected {token!r}, found {self.peek()!r}")
        if token is not None:
            self.tokens.pop(0)

    def expr(self) -> Any:
        left = self.conj()
        while self.peek() == "||":
            self.tokens.pop(0)
            right = self.conj()
            left = left or right
        return left

    def conj(self) -> Any:
        left = self.comparison()
        while self.peek() == "&&":
            self.tokens.pop(0)
            right = self.comparison()
            left = left and right
        return left

    def comparison(self) -> Any:
        left = self.unary()
        if self.peek() in ("==", "!="):
            op = self.tokens.pop(0)[1]
            right = self.unary()
            same = _loose(left) == _loose(right)
            return same if op == "==" else not same
        return left

    def unary(self) -> Any:
        if self.peek() == "!":
            self.tokens.pop(0)
            return not self.unary()
        return self.primary()

    def primary(self) -> Any:
        if not self.tokens:
            raise ExpressionError("unexpected end")
        kind, token = self.tokens.pop(0)
        if kind == "str":
            return token[1:-1].replace("''", "'")
        if kind == "num":
            return float(token)
        if token == "(":
            value = self.expr()
            self.expect(")")
            return value
        if kind != "name":
            raise ExpressionError(f"unexpected {token!r}")
        if token in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[token]
        if self.peek() == "(":
            return self.call(token)
        return self.path(token)

    def call(self, name: str) -> Any:
        self.expect("(")
        arg = self.expr()
        self.expect(")")
        if name == "toJSON":
            return json.dumps(arg, indent=2)
        if name == "fromJSON":
            return json.loads(arg)
        raise ExpressionError(f"function {name}() is not known here")

    def path(self, head: str) -> Any:
        if head not in self.contexts:
            raise ExpressionError(f"context {head!r} is not available here")
        value = self.contexts[head]
        while self.peek() == ".":
            self.tokens.pop(0)
            kind, key = self.tokens.pop(0)
            if kind != "name":
                raise ExpressionError(f"bad property {key!r}")
            if not isinstance(value, Mapping) or key not in value:
                raise ExpressionError(f"{head}...{key}: no such property")
            value = value[key]
        return value


def _loose(value: Any) -> Any:
    """GitHub compares strings case-insensitively and numbers by value."""
    if isinstance(value, str):
        return value.lower()
    return value
