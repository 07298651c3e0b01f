"""``python -m tools.plan``: see ``tools.plan.cli``."""

import sys

from tools.plan.cli import main

sys.exit(main())
