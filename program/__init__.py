"""The composition root, above ``workloads/`` and ``infra/``: the running stack's config
(``program.config``) validated, then every resource of the stack registered in order (``program.stack``).
``__main__.py`` runs ``main``; the offline plan (``tools/plan``) runs it under Pulumi's mock runtime."""

from program.stack import main

__all__ = ["main"]
