"""torch, left out of the rehearsal (tools/rehearse/venv.py ``LEFT_OUT``), stood in for the steps' own programs: the
program that imports it runs up to that import, which says so and ends it (exit 0). MaxText's modules never see it
(the rehearsal's ``python3`` puts this folder on their path only for the steps' programs), and neither does a library
that asks whether torch is installed (no distribution metadata: transformers finds none)."""

import os
import sys

program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "the program"
print(f"tpu-rl rehearse: not run: what follows {program}'s import of torch (torch is left out)", flush=True)
sys.exit(0)
