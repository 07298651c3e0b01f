"""Resource options shared by the components."""

from __future__ import annotations

from typing import Any

import pulumi


def child_options(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, **extra: Any) -> pulumi.ResourceOptions:
    """Options for a component's child: ``parent=`` plus the component's own ``depends_on``.

    Children do not inherit a component's ``depends_on``; a cluster created before its
    API is enabled fails, so the dependency is passed down explicitly.
    """
    depends_on = list(opts.depends_on or []) if opts and isinstance(opts.depends_on, list) else []
    extra_deps = list(extra.pop("depends_on", None) or [])
    return pulumi.ResourceOptions(parent=parent, depends_on=depends_on + extra_deps, **extra)
