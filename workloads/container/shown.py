"""What a step prints of a text from elsewhere (a Hub or GCS error, a record's field, a line of train_rl's log, the API
server's reason): core's redaction of it, as ``make logs`` and ``make status`` redact on the workstation.

The programs of ``workloads/container`` import it from their ConfigMap's folder (``python3 /tpu-rl/<file>`` puts it
first on ``sys.path``; ``workloads/specs/commands.py`` ``program_imports`` ships it beside each, and with it
``core/redact.py`` and what that imports, ``CORE_FILES``: the one redaction of the project, standard library only, as
the image runs it). Every text is first made what a terminal draws (escape sequences, control and invisible
characters removed), then redacted (``core/redact.py``'s rules in its order): the values of the pod's environment
variables named as secrets (``HF_TOKEN``), in any of their forms; private keys; secret fields; a URL's userinfo and a
signed URL's signature; token shapes. This is what a pod's log holds in the cluster, where anyone who may read the
namespace's logs reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core import redact
else:  # python3 /tpu-rl/<program>: redact.py is a file of the same ConfigMap, its folder on sys.path
    import redact

SHORTEST_SECRET = 8
"""A shorter value of a secret's variable is no secret worth a redaction that would mangle ordinary words."""


def held_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's variables named as secrets (``core/redact.py`` ``SECRET_NAMES``)."""
    env = os.environ if environ is None else environ
    return [value for value in redact.env_secrets(dict(env)) if len(value) >= SHORTEST_SECRET]


def redacted(text: object, environ: Mapping[str, str] | None = None) -> str:
    """``text`` as a terminal would draw it, with the pod's secrets (``held_secrets`` of ``environ``, the process's by
    default), private keys, secret fields and token shapes redacted. Newlines and tabs stay."""
    shown = str(text)
    return redact.redact_text(shown, *held_secrets(environ), width=max(len(shown), 1))


def line(text: object, limit: int | None = 300, unprintable: str = "?") -> str:
    """``text`` as one log line (``redacted``, whitespace folded, any other character that does not print as
    ``unprintable``), at most ``limit`` characters (None: whole)."""
    flat = "".join(c if c.isprintable() else unprintable for c in " ".join(redacted(text).split()))
    return " ".join(flat.split())[:limit] if unprintable.isspace() else flat[:limit]
