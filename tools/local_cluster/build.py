"""Build the local cluster's parts from their Go modules, once: ``make local-cluster`` runs it before it starts them.

Each part is built in its own module (``components.COMPONENTS``) with ``-mod=readonly`` (its ``go.sum`` must hold
every digest: nothing is resolved at build time) into the cache, ``$TPU_RL_CACHE`` or ``~/.cache/tpu-rl``, under a
folder named for the part, its release and its module's digests; a finished folder is reused, a new pin builds anew.
Go's own module and build caches are Go's (``go env GOMODCACHE GOCACHE``): a second machine's cold build is
about 8 minutes of two cores for all parts (docs/testing.md "The local cluster")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from core.errors import BadInputError, TpuRlError
from tools.local_cluster.components import COMPONENTS, Component
from tools.process import entry_point

BUILD_SECONDS = 1800
"""One part's build, at most (the control plane's three binaries cold on two cores: about 6 minutes)."""


def cache_home() -> Path:
    return Path(os.environ.get("TPU_RL_CACHE") or Path.home() / ".cache" / "tpu-rl")


def built(component: Component, cache: Path) -> Path:
    """The folder that holds the part's binaries once built."""
    return cache / "local-cluster" / component.key


def go_command() -> str:
    go = shutil.which("go")
    if go is None:
        raise BadInputError(
            "local cluster: no `go` on PATH: install Go 1.26 or newer (https://go.dev/dl) and run again"
        )
    return go


def module_dir(go: str, component: Component, module: str) -> Path:
    """Where Go's module cache holds ``module`` at the version the part's ``go.mod`` requires (downloaded if not)."""
    done = subprocess.run(
        [go, "mod", "download", "-json", module],
        cwd=component.go_dir,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    where = json.loads(done.stdout or "{}").get("Dir") if done.returncode == 0 else None
    if not where:
        raise TpuRlError(f"local cluster: {module} ({component.name}) not in Go's module cache: {done.stderr.strip()}")
    return Path(where)


def build(component: Component, cache: Path, go: str, *, log: Path | None = None) -> Path:
    """The part's binaries, built unless the cache holds them; a failed build is one line naming the part."""
    home = built(component, cache)
    if all((home / b).is_file() for b in component.binaries):
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=home.parent))
    for module, path, name in component.embeds:
        data = json.loads((module_dir(go, component, module) / path).read_text())
        if "resources" in data and component.pinned:  # a package schema: the release's version (generate.go)
            data["version"] = component.pinned.removeprefix("v")
        (component.go_dir / name).write_text(json.dumps(data, separators=(",", ":")))
    command = [go, "build", "-trimpath", "-mod=readonly", "-o", f"{scratch}/"]
    if component.ldflags:
        command += ["-ldflags", component.ldflags]
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": ""}
    try:
        done = subprocess.run(
            [*command, *component.packages],
            cwd=component.go_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(scratch, ignore_errors=True)
        raise TpuRlError(
            f"local cluster: building {component.name} {component.version} took over {BUILD_SECONDS} s: run again "
            "(Go's caches keep what was built)"
        ) from None
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        last = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise TpuRlError(
            f"local cluster: building {component.name} {component.version} ({component.module}) failed: "
            f"{last[-1] if last else f'go build exited {done.returncode}'}"
        )
    for module, path in component.beside:
        shutil.copy(module_dir(go, component, module) / path, scratch / Path(path).name)
    shutil.rmtree(home, ignore_errors=True)
    scratch.rename(home)
    for older in home.parent.glob(f"{component.name}-v*"):  # the part's earlier pins: nothing reads them again
        if older != home:
            shutil.rmtree(older, ignore_errors=True)
    return home


def build_all(cache: Path | None = None, *, engine: bool = False, out: TextIO = sys.stdout) -> dict[str, Path]:
    """The cluster's parts' (``engine``: also the Pulumi CLI's and provider's) folders of binaries, by part name, each
    line saying what was built or reused."""
    cache = cache or cache_home()
    go = go_command()
    homes = {}
    for component in COMPONENTS:
        if component.engine and not engine:
            continue
        started = time.monotonic()
        fresh = not all((built(component, cache) / b).is_file() for b in component.binaries)
        homes[component.name] = build(component, cache, go)
        said = f"built in {time.monotonic() - started:.0f} s" if fresh else "cached"
        stands = f" (stands in for {component.pinned}: {component.why})" if component.pinned else ""
        print(f"local cluster: {component.name} {component.version}: {said}{stands}", file=out)
    return homes


def main() -> int:
    build_all(engine=True)
    return 0


if __name__ == "__main__":
    entry_point(main)
