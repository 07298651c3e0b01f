"""Write ``core/data/gcp-iam-types.json``: every IAM grant resource type of the installed ``pulumi_gcp`` and its
version (``make iam-types``; run it after the provider's pin moves, ``tests/test_policy_iam_types.py`` fails until
then).

The tokens are the provider's own: ``pulumi_gcp/__init__.py`` registers every resource class with its type token
(``_utilities.register(resource_modules=...)``, a JSON list of ``{"mod", "fqn", "classes": {token: class}}``), which
is what the Pulumi Python SDK resolves a state's resources by. Nothing is imported from the package (importing all of
pulumi_gcp takes seconds): the registration is read as text.

    python -m tools.gcp_iam_types [--check]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

from core.errors import TpuRlError
from core.iam_types import DATA, grant_types
from tools.process import entry_point, report

REGISTER = re.compile(r'resource_modules="""(?P<json>.*?)"""', re.S)


def _package() -> Path:
    spec = importlib.util.find_spec("pulumi_gcp")
    if spec is None or spec.origin is None:
        raise TpuRlError("pulumi_gcp is not installed here: run `make venv` first")
    return Path(spec.origin).parent


def read(package: Path) -> tuple[str, list[str]]:
    """(version, IAM grant types) of the provider package at ``package``."""
    version = json.loads((package / "pulumi-plugin.json").read_text())["version"]
    match = REGISTER.search((package / "__init__.py").read_text())
    if match is None:
        raise TpuRlError(f"{package}/__init__.py registers no resource modules: the generator needs updating")
    modules = json.loads(match.group("json"))
    tokens = [token for module in modules for token in module.get("classes", {})]
    return str(version), grant_types(tokens)


def render(version: str, types: list[str]) -> str:
    return json.dumps({"provider": "gcp", "version": version, "types": types}, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is not what the provider has")
    args = parser.parse_args(argv)
    try:
        text = render(*read(_package()))
    except TpuRlError as error:
        return report(error)
    if args.check:
        if DATA.read_text() != text:
            print(f"error: {DATA.name} is not the installed pulumi_gcp's: run `make iam-types`", file=sys.stderr)
            return 1
        return 0
    DATA.write_text(text)
    print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    entry_point(main)
