"""Stack files for the state tools' tests, as the Pulumi CLI writes them (tests/data/stacks/: `pulumi config set` and
`pulumi stack init --secrets-provider` output), edited as `pulumi config set` would, in a checkout of their own."""

from __future__ import annotations

import re
from pathlib import Path

from tools.stack_files import ROOT

STACKS = ROOT / "tests" / "data" / "stacks"
KEY = "projects/acme-tpu/locations/global/keyRings/pulumi-state-{}/cryptoKeys/state"
"""A stack's own key, in its own ring (``core.state_names.state_key``)."""
RING_KEY = "projects/acme-tpu/locations/global/keyRings/pulumi-state/cryptoKeys/tpu-rl-{}"
"""A stack's key of the version before, in the ring every stack's key shared."""
SHARED = "gcpkms://projects/acme-tpu/locations/global/keyRings/pulumi-state/cryptoKeys/pulumi-secrets"
"""The project's shared key of earlier versions."""


def cli_file(
    *, project: str = "acme-tpu", provider: str | None = "", protect: bool = False, config: dict[str, str] | None = None
) -> str:
    """A stack file as the CLI writes it: tests/data/stacks/Pulumi.gcpkms.yaml with ``gcp:project`` set, its
    ``secretsprovider`` replaced (None: the passphrase file's salt instead; "": none), ``tpu-rl:protect`` and the
    keys of ``config`` appended as `pulumi config set` appends them."""
    text = (STACKS / "Pulumi.gcpkms.yaml").read_text().replace("acme-ml-dev", project)
    header, _, body = text.partition("config:\n")
    if provider is None:
        header = (STACKS / "Pulumi.passphrase.yaml").read_text().partition("config:\n")[0]
    elif provider:
        header = re.sub(r"^secretsprovider: .*$", f"secretsprovider: {provider}", header, flags=re.M)
    else:
        header = ""
    config = {**({"tpu-rl:protect": '"true"'} if protect else {}), **(config or {})}
    extra = "".join(f"  {key}: {value}\n" for key, value in config.items())
    return f"{header}config:\n{body}{extra}"


def repo(tmp_path: Path, **files: str) -> Path:
    """A checkout holding ``Pulumi.<stack>.yaml`` for each ``stack=text``."""
    root = tmp_path / "repo"
    root.mkdir(exist_ok=True)
    for stack, text in files.items():
        (root / f"Pulumi.{stack}.yaml").write_text(text)
    return root


def access_lines(members: tuple[str, ...] = (), readers: tuple[str, ...] = (), pool: str = "") -> str:
    """``tpu-rl:access`` as `pulumi config set --path 'tpu-rl:access.members[0]' ...` writes it under ``config:``
    (empty: no field set)."""
    fields = [
        f"    {name}:\n" + "".join(f"      - {m}\n" for m in items)
        for name, items in (("members", members), ("readers", readers))
        if items
    ]
    fields += [f"    workloadIdentityPool: {pool}\n"] if pool else []
    return "  tpu-rl:access:\n" + "".join(fields) if fields else ""
