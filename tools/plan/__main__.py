"""``python -m tools.plan``: see ``tools.plan.cli``."""

from tools.plan.cli import main
from tools.process import exit_now

exit_now(main())
