"""``python -m tools.rehearse``: see ``tools.rehearse.cli``."""

import sys

from tools.process import entry_point
from tools.rehearse.cli import main

entry_point(lambda: main(sys.argv[1:]))
