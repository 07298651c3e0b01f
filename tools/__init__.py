"""Operator tools, above everything they use (nothing declarative imports them): the offline plan
(``python -m tools.plan``), a run's live status (``python -m tools.status``) and its report
(``python -m tools.report``), and the stack files they read as the Pulumi CLI writes them
(``stack_files``)."""
