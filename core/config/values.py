"""Strict readers for one config value: each turns raw input into a typed value or raises ``ConfigError``.

Raw values come from the Pulumi CLI (strings; objects as JSON) or from a stack file (YAML
scalars). A reader accepts the native type and its exact text form only: ASCII digits, finite
numbers inside documented bounds, integers that are integers, scalars that are scalars.
Every error is one line naming the full key, the value (never a secret or a token-shaped
value) and what is allowed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from core.errors import BadInputError, TpuRlError
from core.redact import HF_TOKEN, scrub

MAX_SHOWN = 60
UNSET_SECRET = "[secret not set in the stack file; planned with a placeholder]"
"""What the offline plan passes for a declared secret the stack file lacks (so a plan can be made first)."""
OPAQUE_SECRET = "[secret set in the stack file; not decrypted offline]"
"""What the offline tools (plan, status, report) pass for a ``secure:`` value: the Pulumi CLI decrypts
secrets for `pulumi up`, the offline tools never do. The key counts as set; the value is never
validated, shown or used (a real token has no spaces, so it can never equal this or ``UNSET_SECRET``)."""
OFFLINE_SECRETS = (UNSET_SECRET, OPAQUE_SECRET)


class ConfigError(BadInputError):
    """Stack settings are invalid: one line per problem, each naming key, value and what is allowed
    (``problems``; the message is those lines, so a single problem is one line)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems: tuple[str, ...] = problems


class UnreadableError(TpuRlError):
    """A rule asked for a value whose own error is already reported: the rule is skipped, not reported."""


UNREADABLE: Any = type("Unreadable", (), {"__repr__": lambda self: "<unreadable>"})()
"""The value of a field (or a derived part) that failed: its error is collected, what needs it is skipped."""


class Values(dict[str, Any]):
    """Field values by full key; reading a field that failed raises ``UnreadableError`` (its error is reported)."""

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        if value is UNREADABLE:
            raise UnreadableError(key)
        return value


class Problems:
    """Every problem of a config, collected so that one run reports them all (each one line), in the order
    found. ``run`` calls a reader or rule and returns its result, or ``UNREADABLE`` when it failed (its
    error is kept) or when it needs a value that failed (skipped: that value's error is already kept)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def run(self, function: Callable[..., Any], *args: Any) -> Any:
        if any(arg is UNREADABLE for arg in args):
            return UNREADABLE
        try:
            return function(*args)
        except ConfigError as err:
            self.add(err)
        except UnreadableError:
            pass
        return UNREADABLE

    def add(self, err: ConfigError) -> None:
        self.lines.extend(line for line in err.problems if line not in self.lines)

    def check(self) -> None:
        """Raise every problem found, as one ``ConfigError``."""
        if self.lines:
            raise ConfigError(*self.lines)


class Hidden:
    """A value that must never be echoed (a secret, or anything that looks like a token)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def show(value: Any) -> str:
    """How an error line shows a value: JSON, shortened, never a token."""
    if isinstance(value, Hidden):
        return f"({value.reason}, not shown)"
    if value is None:
        return "null"
    try:
        text = json.dumps(value, sort_keys=True)  # ASCII: escapes control and non-ASCII characters
    except (TypeError, ValueError):
        text = repr(value)
    if HF_TOKEN.search(text):
        return "(a value that looks like a Hugging Face token, not shown)"
    if len(text) <= MAX_SHOWN:
        return text
    return text[: MAX_SHOWN - 4] + ('..."' if text.startswith('"') else "...")


def error(key: str, value: Any, allowed: str) -> ConfigError:
    """The one-line error: ``key = value is invalid: allowed`` (the key as typed, scrubbed: a key is user text too)."""
    return ConfigError(f"{scrub(key, limit=120)} = {show(value)} is invalid: {allowed}")


Reader = Callable[[str, Any], Any]
"""``reader(full_key, raw_value) -> typed value``; raises ``ConfigError``."""

_INT_TEXT = re.compile(r"[+-]?[0-9]{1,15}")
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,3})?")


def _scalar(key: str, value: Any, expected: str) -> None:
    if isinstance(value, (dict, list)):
        raise error(key, value, f"expected {expected}, not {'an object' if isinstance(value, dict) else 'a list'}")


def _bounds(key: str, value: Any, number: float, low: float | None, high: float | None) -> None:
    if low is not None and number < low:
        raise error(key, value, f"must be at least {_fmt(low)}")
    if high is not None and number > high:
        raise error(key, value, f"must be at most {_fmt(high)}")


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(number)


@dataclass(frozen=True)
class Integer:
    """A whole number in ``[low, high]``: a YAML/JSON integer or its ASCII digits."""

    low: int
    high: int

    def __call__(self, key: str, value: Any) -> int:
        _scalar(key, value, "an integer")
        if isinstance(value, (bool, float)):
            raise error(key, value, "expected an integer")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            number = int(value.strip())
        else:
            raise error(key, value, "expected an integer (ASCII digits)")
        _bounds(key, value, number, self.low, self.high)
        return number

    def describe(self) -> str:
        return f"integer {self.low}..{self.high}"


@dataclass(frozen=True)
class Number:
    """A finite number in ``[low, high]``: a YAML/JSON number or its decimal text."""

    low: float
    high: float
    exclusive_low: bool = False

    def __call__(self, key: str, value: Any) -> float:
        _scalar(key, value, "a number")
        if isinstance(value, bool):
            raise error(key, value, "expected a number")
        if isinstance(value, int):
            try:
                number = float(value)
            except OverflowError:  # beyond float range: not finite, like 1e400
                number = math.inf
        elif isinstance(value, float):
            number = value
        elif isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
            number = float(value.strip())
        else:
            raise error(key, value, "expected a finite number such as 0.5 or 2e-5")
        if not math.isfinite(number):
            raise error(key, value, "expected a finite number")
        if self.exclusive_low and number <= self.low:
            raise error(key, value, f"must be above {_fmt(self.low)}")
        _bounds(key, value, number, self.low, self.high)
        return number

    def describe(self) -> str:
        return f"number {'>' if self.exclusive_low else ''}{_fmt(self.low)}..{_fmt(self.high)}"


@dataclass(frozen=True)
class Boolean:
    """``true`` or ``false`` (YAML booleans or their text, any case)."""

    def __call__(self, key: str, value: Any) -> bool:
        _scalar(key, value, "true or false")
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise error(key, value, "expected true or false")

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of strings: a tuple, or a catalogue's live ``keys()`` (so the choices are the entries
    the catalogue holds when a value is read)."""

    choices: Collection[str]

    def __call__(self, key: str, value: Any) -> str:
        _scalar(key, value, f"one of {', '.join(self.choices)}")
        if not isinstance(value, str) or value not in self.choices:
            raise error(key, value, f"expected one of {', '.join(self.choices)}")
        return value

    def describe(self) -> str:
        return " | ".join(self.choices)


@dataclass(frozen=True)
class Text:
    """A string matching ``pattern`` (an integer is taken as its digits, e.g. a numeric tag)."""

    pattern: str
    allowed: str

    def __call__(self, key: str, value: Any) -> str:
        _scalar(key, value, "a string")
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not self.matches(value):
            raise error(key, value, self.allowed)
        return value

    def matches(self, text: str) -> bool:
        """Whether ``text`` is allowed (ASCII character classes only)."""
        return re.fullmatch(self.pattern, text, re.ASCII) is not None

    def describe(self) -> str:
        return self.allowed


_DURATION = re.compile(r"(?:([0-9]{1,4})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,7})s)?")


@dataclass(frozen=True)
class Duration:
    """A Go duration of hours, minutes and seconds (``90m``, ``4h``, ``1h30m``) in ``[low, high]`` seconds."""

    low: int
    high: int

    def __call__(self, key: str, value: Any) -> int:
        _scalar(key, value, "a duration")
        allowed = (
            f"a duration such as 90m, 4h or 1h30m, from {format_duration(self.low)} to {format_duration(self.high)}"
        )
        match = _DURATION.fullmatch(value) if isinstance(value, str) else None
        if not match or not any(match.groups()):
            raise error(key, value, allowed)
        hours, minutes, secs = (int(g or 0) for g in match.groups())
        total = hours * 3600 + minutes * 60 + secs
        if not self.low <= total <= self.high:
            raise error(key, value, allowed)
        return total

    def describe(self) -> str:
        return f"duration {format_duration(self.low)}..{format_duration(self.high)}"


def format_duration(seconds: int) -> str:
    """5400 -> ``1h30m``; a Go duration the Pulumi engine parses."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"


_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_CIDR = re.compile(rf"{_OCTET}(\.{_OCTET}){{3}}/(3[0-2]|[12]?[0-9])")


def canonical_cidr(key: str, value: Any) -> str:
    """A canonical IPv4 CIDR ``a.b.c.d/n``: no leading zeros, prefix given, host bits zero."""
    import ipaddress

    _scalar(key, value, "a CIDR block")
    allowed = "an IPv4 CIDR block a.b.c.d/n such as 203.0.113.0/24 (prefix 0-32, no leading zeros, host bits zero)"
    if not isinstance(value, str) or not _CIDR.fullmatch(value):
        raise error(key, value, allowed)
    network = ipaddress.ip_network(value, strict=False)
    if str(network) != value:
        raise error(key, value, f"host bits are set; the network is {network}")
    return value
