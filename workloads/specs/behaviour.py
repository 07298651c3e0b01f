"""A program's text as its step's identity hashes it: what it does, not how it is explained.

A step's name is the hash of what it runs (``workloads.specs.step_specs.identity``), and a new name runs the step
again: hours of training for a typo fixed in a docstring. So a Python file of a step's ConfigMap is hashed without its
comments, its docstrings (a string that stands as a statement: one opening a module, class or function body, or one
after an assignment), the spaces that end a line and the lines left empty. Both are found where the interpreter puts
them (``tokenize``'s comments, ``ast``'s positions), which every Python version agrees on, so the name is the same
whichever Python runs `pulumi up`. A change to code, to a string the program uses or to the nesting of its blocks is a
new name; a change to what explains it is none. The step's ConfigMap still ships the file as written; an existing step
keeps the text it was created with (``ignoreChanges`` on its data, ``workloads.workflow``). Text that is not Python
(the bash script, training's overrides) is hashed as it is.
"""

from __future__ import annotations

import ast
import functools
import io
import tokenize

Span = tuple[tuple[int, int], tuple[int, int]]
"""(start, end) as (line, column), lines from 1, end exclusive."""


def _docstrings(source: str, lines: list[str]) -> list[Span]:
    """The span of each string that stands as a statement of its own: a docstring (the string a module, class or
    function body opens with) or an attribute's (the string after an assignment); neither is ever evaluated into
    anything. ``ast`` counts columns in UTF-8 bytes, a line's text in characters."""

    def column(line: int, offset: int) -> int:
        return len(lines[line - 1].encode()[:offset].decode(errors="ignore"))

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            end_line = node.end_lineno or node.lineno
            start = (node.lineno, column(node.lineno, node.col_offset))
            found.append((start, (end_line, column(end_line, node.end_col_offset or 0))))
    return found


def _comments(source: str) -> list[Span]:
    return [
        (token.start, token.end)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]


@functools.cache  # every plan hashes the same few programs: parsed once per process
def behaviour(source: str) -> str:
    """``source`` without its comments, docstrings, trailing spaces and empty lines; a file that does not parse as
    Python is returned as it is (its text is all there is to hash)."""
    lines = source.splitlines()
    try:
        spans = _docstrings(source, lines) + _comments(source)
    except (SyntaxError, tokenize.TokenError, ValueError):
        return source
    for (start_line, start_col), (end_line, end_col) in sorted(spans, reverse=True):
        head, tail = lines[start_line - 1][:start_col], lines[end_line - 1][end_col:]
        lines[start_line - 1 : end_line] = [head + tail]
    kept = [line.rstrip() for line in lines if line.strip()]
    return "\n".join(kept) + "\n"
