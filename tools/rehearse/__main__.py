"""``python -m tools.rehearse``: see ``tools.rehearse.rehearsal``."""

from tools.process import entry_point
from tools.rehearse.rehearsal import main

entry_point(main)
