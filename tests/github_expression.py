"""GitHub Actions expressions (``${{ ... }}``), evaluated as the runner's expression engine evaluates the part of the
language the workflows use, so that a test can ask what a workflow's ``runs-on``, ``environment`` or ``if`` comes to
for given contexts.

The semantics are actions/runner's ``src/Sdk/DTExpressions2/Expressions2``: ``||`` returns the first truthy operand's
value, else the last (``Sdk/Operators/Or.cs``), ``&&`` the first falsy one's, else the last (``And.cs``); an index or
a property of what is not an object is null (``Index.cs``), a missing property too; names and string comparisons
ignore case (GitHub Docs, "Evaluate expressions in workflows and actions": "GitHub ignores case when comparing
strings"); falsy are ``false``, ``0``, ``''`` and ``null``. Functions: ``fromJSON`` only; anything else the grammar
does not know is an error, never a guess.
"""

from __future__ import annotations

import json
import re
from typing import Any

TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[()\[\].!,])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)
TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class ExpressionError(ValueError):
    """An expression this evaluator does not read."""


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, at = [], 0
    while at < len(text.rstrip()):
        match = TOKEN.match(text, at)
        if not match or match.end() == at:
            raise ExpressionError(f"cannot read {text[at:]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        at = match.end()
    return tokens


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "")


def _member(value: Any, key: Any) -> Any:
    if not isinstance(value, dict):
        return None
    wanted = str(key).lower()
    return next((v for k, v in value.items() if k.lower() == wanted), None)


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    return bool(left == right)


class _Parser:
    def __init__(self, text: str, contexts: dict[str, Any]) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.contexts = contexts

    def peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens) or (expected is not None and self.tokens[self.at][1] != expected):
            raise ExpressionError(f"expected {expected!r} at token {self.at}")
        self.at += 1
        return self.tokens[self.at - 1]

    def parse(self) -> Any:
        value = self.or_()
        if self.at != len(self.tokens):
            raise ExpressionError(f"unexpected {self.peek()!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            value = value if truthy(value) else right
        return value

    def and_(self) -> Any:
        value = self.compare()
        while self.peek() == "&&":
            self.take()
            right = self.compare()
            value = right if truthy(value) else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        while self.peek() in ("==", "!="):
            op = self.take()[1]
            right = self.unary()
            value = _equal(value, right) == (op == "==")
        return value

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not truthy(self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Any:
        kind, text = self.take()
        if text == "(" and kind == "op":
            value = self.or_()
            self.take(")")
            return value
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return float(text) if "." in text else int(text)
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self.peek() == "(":
            self.take("(")
            argument = self.or_()
            self.take(")")
            if text.lower() != "fromjson":
                raise ExpressionError(f"function {text} is not read here")
            return json.loads(str(argument))
        return _member(self.contexts, text)

    def postfix(self, value: Any) -> Any:
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                value = _member(value, self.take()[1])
            else:
                value = _member(value, self.or_())
                self.take("]")
        return value


def evaluate(expression: str, contexts: dict[str, Any]) -> Any:
    """The value of one expression (the text inside ``${{ }}``, or a bare ``if``)."""
    return _Parser(expression, contexts).parse()


def _text(value: Any) -> str:
    """A value as text, as GitHub casts it (GitHub Docs, Functions: null is '', booleans 'true' and 'false')."""
    return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def render(text: str, contexts: dict[str, Any]) -> Any:
    """A workflow value: one ``${{ }}`` alone is its value (an object from ``fromJSON`` stays one); otherwise each is
    replaced by its value as text."""
    whole = TEMPLATE.fullmatch(text.strip())
    if whole:
        return evaluate(whole.group(1), contexts)
    return render_text(text, contexts)


def render_text(text: str, contexts: dict[str, Any]) -> str:
    """A value that is text, as a step's ``env`` entry: every ``${{ }}`` replaced by its value as text."""
    return TEMPLATE.sub(lambda match: _text(evaluate(match.group(1), contexts)), text)
