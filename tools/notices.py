"""The one third-party warning the operator tools hide, and why (everything else still shows)."""

from __future__ import annotations

import warnings


def hide_python_version_notice() -> None:
    """Hide google-api-core's notice that a Python version nears its end of life.

    google-api-core warns when it is imported, from a year before a Python version's end of life, that Google's
    client libraries will stop supporting that version (``google/api_core/__init__.py`` calls
    ``check_python_version``, ``google/api_core/_python_version_support.py``: ``warnings.warn(message,
    FutureWarning)`` once ``python_eol - 365 days <= today``). On Python 3.11 (end of life 2027-10-24) that is every
    run from 2026-10-24: `make report` and `make status` printed it although the project supports Python 3.11
    (pyproject.toml ``requires-python``) and the tools cannot act on it. Only that warning, from that module, is
    filtered; a newer Python never raises it."""
    warnings.filterwarnings(
        "ignore",
        message=r"You are using a Python version \(",
        category=FutureWarning,
        module=r"google\.api_core\._python_version_support$",
    )
