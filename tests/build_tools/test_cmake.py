"""build_tools._cmake: command calls read as CMake's grammar reads them."""

from __future__ import annotations

import pytest

from build_tools._cmake import CMakeCall, cmake_calls
from kpack.errors import UsageError


def _calls(text: str) -> list[CMakeCall]:
    return cmake_calls(text, source="t.cmake", error=UsageError)


def test_arguments_and_lines() -> None:
    text = (
        "#[==[ a bracket comment\n foo(hidden) ]] still hidden\n]==]\n"  # lines 1-3
        'Foo(a "b # not a comment\n c" [[d ) e]] f"g h"i)  # a comment ( \n'  # lines 4-5
        "if(NOT (A AND B))\n"  # line 6
        "function(foo x)\nendfunction()\n"  # lines 7-8
        'message("\\" (")\n'  # line 9
    )
    assert _calls(text) == [
        CMakeCall("foo", 4, ("a", "b # not a comment\n c", "d ) e", 'f"g h"i')),
        CMakeCall("if", 6, ("NOT", "(", "A", "AND", "B", ")")),
        CMakeCall("function", 7, ("foo", "x")),
        CMakeCall("endfunction", 8, ()),
        CMakeCall("message", 9, ('\\" (',)),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('foo("a)\n', 'line 1: unterminated quoted argument (no closing ")'),
        ("\nfoo([=[a]]\n)\n", "line 2: unterminated bracket argument (no closing ]=])"),
        ("#[[\n", "line 1: unterminated bracket comment (no closing ]])"),
        ("foo(a)\nbar(b\n", "line 2: the call bar( is never closed"),
        ("foo(a))\n", "line 1: ')' without a matching '('"),
        ("foo(a)\n\\", "line 2: a backslash at the end of the file"),
    ],
)
def test_what_cmake_would_not_parse(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        _calls(text)
    assert str(info.value) == f"t.cmake: {message}"
