"""Plain data shared by ``infra/``, ``workloads/`` and ``policy/`` (no Pulumi here).

The typed settings every builder takes (``core.settings``), the fact tables of the
things we deploy (TPU slices, machine families, models, training knobs, MaxText 0.2.4's
configuration keys) and the names both sides of a cluster contract use (``core.names``).
"""
