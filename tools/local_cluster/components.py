"""The local cluster's parts: one catalogue entry per Go module, each built from ``go/<name>/`` (a module of its own
whose ``go.mod`` requires the part's release as a ``tool`` and whose ``go.sum`` pins every dependency by digest).

Each part gets a module of its own because their dependency graphs disagree (Kubernetes' own staging modules, the
controllers' client-go releases, Pulumi's gRPC). A part whose release the Go module proxy does not serve names the
release the program pins (``pinned``) and the one built instead (``version``), with the proxy's answer (``why``)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

GO_DIR = Path(__file__).with_name("go")
"""The parts' Go modules, one folder per part."""


@dataclass(frozen=True)
class Component:
    name: str
    module: str
    version: str
    packages: tuple[str, ...]
    """The main packages ``go build`` makes, one binary each, named as the package's last element."""
    ldflags: str = ""
    pinned: str = ""
    """The release the program pins where the proxy serves another (empty: the same)."""
    why: str = ""
    """The proxy's answer for ``pinned``."""
    engine: bool = False
    """Part of the Pulumi engine (the CLI, a provider) rather than of the cluster."""
    beside: tuple[tuple[str, str], ...] = ()
    """Files of its modules copied beside its binaries: (module, path in the module)."""
    embeds: tuple[tuple[str, str, str], ...] = ()
    """JSON files of its modules its main package embeds, written into ``go_dir`` before the build as the release's
    own generator writes them (re-serialized; a package schema with its ``version`` set to ``pinned``):
    (module, path in the module, name)."""

    @property
    def binaries(self) -> tuple[str, ...]:
        """What ``go build`` names each package's binary: its last element, or the one before a major version's."""
        names = []
        for package in self.packages:
            parts = package.split("/")
            names.append(parts[-2] if re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1])
        return tuple(names)

    @property
    def go_dir(self) -> Path:
        return GO_DIR / self.name

    @property
    def key(self) -> str:
        """The build cache's folder: the part, its release and the digest of its module's files (``go.mod``, ``go.sum``
        and any ``main.go`` of its own; not the files the build generates)."""
        digest = hashlib.sha256()
        generated = {name for _module, _path, name in self.embeds} | {".gitignore"}
        for path in sorted(p for p in self.go_dir.iterdir() if p.name not in generated):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        return f"{self.name}-{self.version}-{digest.hexdigest()[:12]}"


KUBERNETES = "v1.34.4"
"""The control plane's release: the client-go line JobSet 0.10.1 and Kueue 0.17 are built against (0.34)."""
PULUMI = "v3.276.0"
"""The Pulumi CLI: the proxy serves no 3.272 (requirements.lock's SDK); the CLI runs older SDKs."""

PROVIDER_COMMIT = "v4.0.0-20260115033456-f47bc2d6f199"
PROVIDER_AS = "4.34.2"
"""The provider's version as the Python SDK (requirements.lock) asks for it: the binary is installed as that."""

COMPONENTS = (
    Component("etcd", "go.etcd.io/etcd/server/v3", "v3.6.13", ("go.etcd.io/etcd/server/v3",)),
    Component(
        "kubernetes",
        "k8s.io/kubernetes",
        KUBERNETES,
        tuple(f"k8s.io/kubernetes/cmd/{c}" for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
        ldflags=f"-X k8s.io/component-base/version.gitVersion={KUBERNETES} -X k8s.io/component-base/version.gitMajor=1"
        " -X k8s.io/component-base/version.gitMinor=34",
    ),
    Component("kwok", "sigs.k8s.io/kwok", "v0.7.0", ("sigs.k8s.io/kwok/cmd/kwok",)),
    Component("jobset", "sigs.k8s.io/jobset", "v0.10.1", ("sigs.k8s.io/jobset",)),
    Component(
        "kueue",
        "sigs.k8s.io/kueue",
        "v0.17.1",
        ("sigs.k8s.io/kueue/cmd/kueue",),
        pinned="v0.17.8",
        why="proxy.golang.org: sigs.k8s.io/kueue@v0.17.8: 403 Forbidden (This module version is not available.)",
    ),
    Component(
        "pulumi",
        "github.com/pulumi/pulumi/pkg/v3",
        PULUMI,
        ("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",),
        ldflags=f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI}",
        engine=True,
    ),
    Component(
        "pulumi-language-python",
        "tpu-rl.local/pulumi-language-python",
        PULUMI,
        ("tpu-rl.local/pulumi-language-python",),
        ldflags=f"-X main.version={PULUMI}",
        why="proxy.golang.org: github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3@v3.276.0: 403 "
        "Forbidden (This module version is not available.): ours runs the release's executor (go/"
        "pulumi-language-python/main.go)",
        pinned=PULUMI,
        engine=True,
        beside=(("github.com/pulumi/pulumi/sdk/v3", "python/cmd/pulumi-language-python-exec"),),
    ),
    Component(
        "pulumi-kubernetes",
        "github.com/pulumi/pulumi-kubernetes/provider/v4",
        PROVIDER_COMMIT,
        ("tpu-rl.local/pulumi-resource-kubernetes",),
        ldflags=f"-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version={PROVIDER_AS}",
        pinned=f"v{PROVIDER_AS}",
        why="proxy.golang.org serves provider/v4 at one commit only, of 2026-01-15; its main package embeds a file "
        "its release build generates (go/pulumi-kubernetes/main.go)",
        engine=True,
        embeds=tuple(
            ("github.com/pulumi/pulumi-kubernetes/provider/v4", f"cmd/pulumi-resource-kubernetes/{name}.json", embed)
            for name, embed in (("schema", "schema-embed.json"), ("terraform-mapping", "terraform-mapping-embed.json"))
        ),
    ),
)
