"""How a run of a step's program ends, what every step's programs share: a file of each ConfigMap whose programs import
it, beside them in its folder (``workloads.specs.commands.program_imports``); standard library only, as the image runs
it, and ``errors.py`` (``core/errors.py``, shipped beside it).

``RefusedError`` for what the program was given, which fails the same way on every try (exit ``REFUSED``: the step is
not retried), ``FailedError`` for what failed outside it this time (exit 1: a later try, or the step's next run, may
succeed); both in the project's one error tree (``core.errors``).

Only what every step's programs use is here: a step's name is the hash of the files its ConfigMap ships, so what
fewer steps use is a file of its own, shipped by those steps alone (``tpu_rl_watch.py``, training's;
``tpu_rl_download.py``, the evaluation's and the publication's), and a change to it renames only them. The folder of
the ConfigMap comes first on ``sys.path``, so a file named like a package of the image would hide that package from
every program of the folder: no package has a top-level module named ``tpu_rl_*``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core.errors import BadInputError, TpuRlError
else:  # python3 /tpu-rl/<program>.py: core's errors.py is a file of the same ConfigMap
    from errors import BadInputError, TpuRlError

REFUSED = 3
"""A refusal's exit status (``core.names.SETUP_FAILURE_EXIT``): the step fails at once and is not retried."""
FAILED = 1
"""A failure's exit status: the step fails, and the next `make up` runs it again."""


class RefusedError(BadInputError):
    """What the program was given fails the same way on every try (an argument, a record, an image, an answer no retry
    changes such as an API's 403): a program that ends on it exits ``REFUSED``."""

    exit_code = REFUSED


class FailedError(TpuRlError):
    """Something outside the program failed this time (the Hub, GCS, the API server, a model that does not load): a
    later try may succeed; a program that ends on it exits ``FAILED``."""
