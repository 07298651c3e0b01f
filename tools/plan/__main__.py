"""``python -m tools.plan``: see ``tools.plan.cli``."""

from tools.plan.cli import main
from tools.process import entry_point

entry_point(main)
