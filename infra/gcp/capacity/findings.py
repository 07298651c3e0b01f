"""What the capacity check says: one ``Finding`` a line (pure).

A *problem* stops `pulumi up` (and a preview) before anything is created; an *unknown* is a warning (the check
cannot decide: no permission, no answer, an unreadable reply, a quota rule the sources do not settle); a *note*
is said and changes nothing, unless it carries a resource to reuse (``Finding.reuse``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    level: str
    """problem (stops `up`) | unknown (a warning: the check cannot decide) | note."""
    text: str
    reuse: str = ""
    """A note's resource id that survived a destroy and that this `up` imports instead of creating."""
