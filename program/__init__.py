"""The composition root, above ``workloads/`` and ``infra/``: the running stack's config
(``program.config``) validated, then every resource of the stack registered in order (``program.stack``), reading the
world through the one object it is given (``program.world``). ``__main__.py`` runs ``main`` with the real world; the
offline plan (``tools/plan``) runs it under Pulumi's mock runtime with none."""

from program.stack import main
from program.world import live_world

__all__ = ["live_world", "main"]
