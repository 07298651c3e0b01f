"""``python -m infra.plan``: see ``infra.plan.cli``."""

import sys

from infra.plan.cli import main

sys.exit(main())
