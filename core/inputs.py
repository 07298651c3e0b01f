"""Reading what comes from outside (stack files, kubeconfigs, server replies, run records) with limits
checked before parsing: only regular files, sizes checked before reading, nesting depth checked on the
token stream before any object is built, integers of bounded size. Every failure is one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from core.errors import BadInputError
from core.hf_model import MAX_JSON_DEPTH, JsonDocumentError, json_document

MAX_DEPTH = MAX_JSON_DEPTH
"""Nesting a stack file, a kubeconfig or an API object needs is under 20 levels."""


class InputError(BadInputError):
    """The input cannot be read or parsed within the limits (one line)."""


def read_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; a FIFO, a device, a directory or a larger
    (or sparse) file is refused before anything is read from it."""
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"cannot read {path}: not a regular file")
        if info.st_size > max_bytes:
            raise InputError(f"{path} is larger than {max_bytes} bytes")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise InputError(f"{path} is larger than {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)


SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader on libyaml's parser, which every PyYAML wheel carries (the pure-Python one where it is
missing): it reads the same documents some ten times faster (a stack file, MaxText's base.yml, a 0.9 MB JobSet CRD),
its errors worded a little differently (``tests/test_inputs_yaml.py`` holds the two to the same values and
refusals)."""


class _SafeLoader(SAFE_LOADER):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader (a separate class, so nothing registered on it leaks elsewhere), reading what a
    stack file, a kubeconfig or an object holds as the Pulumi CLI and kubectl (Go's yaml.v3) read it: a date or
    time is text (yaml.v3 makes a timestamp a time only for a field typed as one), and the tags of other YAML
    types (``!!binary``, ``!!set``, ``!!omap``, ``!!pairs``, ``!!timestamp``) are refused by name."""


_SafeLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_REFUSED_TAGS = ("binary", "set", "omap", "pairs", "timestamp")


def _refuse_tag(loader: yaml.SafeLoader, node: yaml.Node) -> None:
    raise yaml.constructor.ConstructorError(
        None, None, f"the YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not a value here", node.start_mark
    )


for _tag in _REFUSED_TAGS:
    _SafeLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def parse_yaml(text: str, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """One YAML document: no aliases (no alias bombs), at most ``max_depth`` levels, checked on the
    event stream before the document is composed; integers of at most 4,300 digits."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise InputError(f"{what} uses YAML aliases (*name), which are not allowed here")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > max_depth:
                    raise InputError(f"{what} is nested deeper than {max_depth} levels")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 (a SafeLoader subclass)
    except InputError:
        raise
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{what} is not valid YAML{where}: {problem}") from None
    except (ValueError, RecursionError, OverflowError) as err:  # an integer with thousands of digits
        raise InputError(f"{what} holds a value out of range ({type(err).__name__})") from None


def parse_json(data: bytes | str, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """A JSON document from outside (``core.hf_model.json_document``, the one JSON reader of the project and of the
    step programs): at most ``max_depth`` levels, checked before parsing, and integers of at most 4,300 digits;
    ``InputError`` (one line) otherwise."""
    try:
        return json_document(data, what, max_depth=max_depth)
    except JsonDocumentError as err:
        raise InputError(str(err)) from None
