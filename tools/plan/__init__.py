"""Offline plan: the real program under Pulumi's mock runtime, with stack files read as the CLI reads them.

python -m tools.plan (--stack NAME | --config-file FILE) [--set KEY=VALUE ...] [--out DIR]
"""

from tools.plan.cli import main, plan_stack, write_plan

__all__ = ["main", "plan_stack", "write_plan"]
