"""Adopt a JobSet or Kueue release: what the stack relies on checked in its source, its CRDs vendored, one command.

    python -m tools.adopt_controller {jobset,kueue} VERSION [--repo GIT_DIR]
    (make controller NAME=kueue VERSION=0.17.8 [REPO=GIT_DIR])

1. Reads the release's tag ``v<VERSION>`` from a git repository: ``--repo`` (a clone or a bare mirror of
   github.com/kubernetes-sigs/<name> holding the tag; offline), else a bare, blob-less clone of that tag alone
   into ``build/<name>-v<VERSION>.git`` (``git clone``, bounded by ``CLONE_SECONDS``).
2. Checks, in the tag's files, what the stack relies on, and exits 1 with one line per check that fails, writing
   nothing:
   - its packaging script (``hack/helm-chart-package.sh``) publishes the chart as ``VERSION``, the tag without its
     ``v``: the version the stack gives Helm (``--chart-checked`` skips this where the script changed and ``helm
     show chart`` found the chart);
   - each CRD whose objects the stack creates (``core.controllers.CRDS``,
     ``config/components/crd/bases/<group>_<plural>.yaml``) serves the API version they are written in
     (``core.controllers.API_VERSIONS``);
   - JobSet: its chart ships that same CRD in ``charts/jobset/crds/`` (Helm installs ``crds/`` on the chart's first
     install only, so `up` checks the cluster's CRD before an upgrade: ``infra.k8s.manifests.jobset_crd_problem``,
     with the fields written here), and those fields tell it from every JobSet adopted before (else that check
     could not see the older CRD);
   - Kueue: its chart renders those CRDs from ``charts/kueue/templates/crd/`` unconditionally, with the same
     versions and names (so an upgrade of the release applies them); its ``values.yaml`` has every value path
     tpu-rl sets (``core.controllers.CHART_VALUES``); its ``Configuration``
     (``apis/config/v1beta2/configuration_types.go``, decoded strictly: ``pkg/config/config.go`` ``fromFile``,
     ``serializer.EnableStrict``) has every field of the stack's manager configuration
     (``core.kueue_manager.configuration``; fields of other packages' types are not checked), and each integration it
     names is one Kueue registers (``FrameworkName`` in ``pkg/controller/jobs/``);
   - every label and annotation key of the controller the stack's objects and readers rely on
     (``core.controllers.RELIED_ON``: the env ``fieldRef``\\ s, the exclusive-topology annotation, the queue label)
     is declared as a Go constant and used as the stack relies on it;
   - every word of the controller the stack's wait, recovery and failure-policy rules match (``core.controller_strings
     .STRINGS``: a Workload's condition types and reasons, the scheduler's messages, a JobSet's terminal states) is
     still a Go string literal of the file that writes it;
   - JobSet: the ``k8s.io/api`` its ``go.mod`` requires is of a Kubernetes minor whose words the rules match were read
     (``core.controller_strings.KUBERNETES_MINORS``: the Job controller's reasons and its pod failure policy's message,
     the pods' conditions and events), its webhook accepts each Job failure reason the training JobSet's failure policy
     names (``validOnJobFailureReasons``), and it matches a rule's reasons whole and its message patterns as regular
     expressions searched in the Job's message (``pkg/controllers/failure_policy.go``).
   The Go files are read for their facts alone (``tools.controller_facts``: the keys' constants and where they are
   used, the Configuration's fields, the integrations' names, the lines of the words' literals, JobSet's failure
   policy), and the checks run on those facts.
3. Writes the CRDs to ``tests/data/vendor/schemas/<name>-v<VERSION>/`` (``xz``), with the facts as ``facts.json``
   beside them (no Go source: the facts, with the upstream, tag, commit and licence they come from), their
   ``SHA256SUMS`` lines and their rows of ``tests/data/vendor/README.md``, and the release's entry of
   ``core/data/controllers.json`` (its commit, its CRDs, JobSet's own fields, its facts), which the configuration,
   the `up` checks and the policy pack read. A release adopted again is written afresh.
4. Prints what changed against the newest release adopted before: each CRD's fields added and removed.

`make test` then validates every step's JobSet against every adopted JobSet's CRD and the flavors and queues against
every Kueue's, and runs the checks again on every adopted release's facts (docs/releases.md "Adopting a JobSet or
Kueue release", which lists what a human reads besides). Bad arguments exit 2; a git failure is one line with git's own
``fatal:`` line, exit 1.
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.controllers import API_VERSIONS, CHART_VALUES, CONTROLLERS, CRDS, DATA, Controller, crd_file, facts_file
from core.inputs import SAFE_LOADER
from core.kueue_manager import configuration
from infra.k8s.kueue import CHART as KUEUE_CHART
from infra.k8s.manifests import JOBSET_CHART, jobset_crd_fields
from tools.controller_facts import extract, fact_problems
from tools.process import entry_point
from tools.vendoring import AdoptError, compressed, git_blob, merge_sums, run, sha256

ROOT = Path(__file__).resolve().parents[1]
VENDOR_DIR = ROOT / "tests" / "data" / "vendor"
URL = "https://github.com/kubernetes-sigs/{name}.git"
CLONE_SECONDS = 300
GIT_SECONDS = 60
VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
LICENCE = "Apache-2.0"
CRD_DIR = "config/components/crd/bases"
PACKAGING = "hack/helm-chart-package.sh"
PUBLISHED_AS = ('chart_version="${GIT_TAG/#v/}"', 'package --version "${chart_version}"')
"""What the release's packaging script says of the chart's version (both projects, v0.10.1 to v0.19.2): the tag
without its ``v``, the version ``infra/k8s/platform.py`` gives Helm."""
CHARTS: dict[Controller, str] = {"jobset": JOBSET_CHART, "kueue": KUEUE_CHART}
NEXT = (
    "next: make readme (the configuration page lists the versions), TPU_RL_UPDATE_MESSAGES=1 .venv/bin/python -m "
    "pytest -q tests/test_config_rejections.py (the refusals that list them), make test; then "
    "docs/releases.md 'Adopting a JobSet or Kueue release' (what a human reads)"
)
ABOUT = (
    "Facts tools/adopt_controller.py (make controller) extracted from the release's Go source at its tag for the "
    "checks of tools/controller_facts.py: names, values, JSON field paths and line numbers, not source code."
)
SAMPLE_TIMEOUTS = (1800, 1800)
"""Kueue's waitForPodsReady timeouts for the manager configuration checked (any values: only its fields count)."""


def _said(stderr: bytes) -> str:
    """What git said of its failure: its first ``fatal:`` line, else its last line."""
    lines = stderr.decode(errors="replace").strip().splitlines() or ["no output"]
    return next((line for line in lines if line.startswith("fatal:")), lines[-1])[:300]


@dataclass(frozen=True)
class Tag:
    """A release's tag in a git repository, read with ``git``."""

    repo: Path
    name: str

    def git(self, *args: str) -> bytes:
        try:
            done = subprocess.run(
                ["git", "-C", str(self.repo), *args], capture_output=True, timeout=GIT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            raise AdoptError(f"git {' '.join(args)} in {self.repo} took over {GIT_SECONDS} s") from None
        if done.returncode != 0:
            raise AdoptError(f"git {' '.join(args)} in {self.repo} failed ({_said(done.stderr)})")
        return done.stdout

    def commit(self) -> str:
        """The commit the tag names; a repository without the tag is one line saying so."""
        try:
            return self.git("rev-parse", "--verify", "--quiet", f"{self.name}^{{commit}}").decode().strip()
        except AdoptError:
            raise AdoptError(f"{self.repo} has no tag {self.name}: check the version, or fetch its tags") from None

    def has(self, path: str) -> bool:
        """Whether the tag holds file ``path``: trees only, which a blob-less clone answers without the network."""
        return path in self.git("ls-tree", "--name-only", self.name, "--", path).decode().splitlines()

    def read(self, path: str) -> bytes | None:
        """The file at the tag (None: it has none); any other failure of git is an ``AdoptError``. Read first, and
        looked up only when the read fails: one git for a file the tag holds, the read's own failure for one that
        cannot be read (a blob a blob-less clone cannot fetch)."""
        try:
            return self.git("show", f"{self.name}:{path}")
        except AdoptError:
            if not self.has(path):
                return None
            raise


def clone(name: Controller, version: str, url: str) -> Path:
    """A bare, blob-less clone of tag ``v<version>`` alone, under ``build/``."""
    target = ROOT / "build" / f"{name}-v{version}.git"
    if target.exists():
        return target
    command = ["git", "clone", "--quiet", "--bare", "--filter=blob:none", "--depth", "1", "--branch", f"v{version}"]
    try:
        done = subprocess.run([*command, url, str(target)], capture_output=True, timeout=CLONE_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise AdoptError(f"cloning {url} took over {CLONE_SECONDS} s: check the network, or pass --repo") from None
    if done.returncode != 0:
        raise AdoptError(
            f"cloning tag v{version} of {url} failed ({_said(done.stderr)}): check the version, or pass --repo"
        )
    return target


# ---------------------------------------------------------------------------------------------
# What the stack relies on, checked in the tag's files


def served_spec_fields(crd: dict[str, Any], api_version: str) -> frozenset[str] | None:
    """The top-level ``spec`` fields ``crd`` serves at ``api_version`` (None: it does not serve it)."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(version, dict) and version.get("name") == api_version and version.get("served"):
            schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
            return frozenset((schema.get("spec") or {}).get("properties") or {})
    return None


def _fields(name: Controller, crd: dict[str, Any]) -> frozenset[str]:
    """What the printout compares: JobSet's own fields as paths (``jobset_crd_fields``), Kueue's top-level spec."""
    if name == "jobset":
        return jobset_crd_fields(crd)
    return served_spec_fields(crd, API_VERSIONS[name]) or frozenset()


def parse_yaml(content: bytes | str) -> Any:
    """A YAML document as ``core.inputs.SAFE_LOADER`` reads it (every YAML this command reads goes through here)."""
    return yaml.load(content, Loader=SAFE_LOADER)


def _load(content: bytes, what: str) -> Any:
    try:
        return parse_yaml(content)
    except yaml.YAMLError as err:
        raise AdoptError(f"{what} is not YAML ({type(err).__name__})") from None


HELM_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
HELM_CONDITION = re.compile(r"\{\{-?\s*(if|with|range)\b")


def template_problem(template: bytes, crd: dict[str, Any]) -> str | None:
    """Why a chart's CRD template does not render ``crd`` on every install and upgrade (None: it does): a condition
    around the object, or other served versions or names. The template's own actions (labels, the cert-manager
    annotation, the conversion webhook's service) are left out of the comparison."""
    text = HELM_COMMENT.sub("", template.decode(errors="replace"))
    head, found, _ = text.partition("apiVersion:")
    if not found or HELM_CONDITION.search(head):
        return "renders it only under a condition"
    plain = "\n".join(line for line in text.splitlines() if "{{" not in line and "}}" not in line)
    try:
        rendered = parse_yaml(plain) or {}
    except yaml.YAMLError:
        return "cannot be read as the CRD"

    def served(doc: dict[str, Any]) -> tuple[Any, Any]:
        spec = doc.get("spec") or {}
        versions = [(v.get("name"), v.get("served")) for v in spec.get("versions") or [] if isinstance(v, dict)]
        return spec.get("names"), versions

    return None if served(rendered) == served(crd) else "serves other versions or names than the CRD"


def _has_path(values: Any, path: tuple[str, ...]) -> bool:
    for part in path:
        if part == "*":
            return isinstance(values, dict)
        if not isinstance(values, dict) or part not in values:
            return False
        values = values[part]
    return True


def check(
    name: Controller,
    version: str,
    tag: Tag,
    adopted: dict[str, frozenset[str]],
    chart_checked: bool = False,
) -> tuple[dict[str, bytes], frozenset[str], dict[str, Any], list[str]]:
    """The CRDs to vendor (plural -> content), JobSet's own fields, the facts of its Go source
    (``tools.controller_facts.extract``) and the problems (the module's docstring). ``adopted``: the fields of the
    JobSets adopted before, by version."""
    api = API_VERSIONS[name]
    files: dict[str, bytes] = {}
    problems: list[str] = []
    schema_fields: frozenset[str] = frozenset()
    for plural in CRDS[name]:
        path = f"{CRD_DIR}/{name}.x-k8s.io_{plural}.yaml"
        content = tag.read(path)
        if content is None:
            problems.append(f"{name} v{version} has no {path}")
            continue
        parsed = _load(content, f"{path} of {name} v{version}") or {}
        if served_spec_fields(parsed, api) is None:
            problems.append(f"{path} of {name} v{version} does not serve {api}, the API the stack's objects use")
            continue
        files[plural] = content
        if name == "jobset":
            schema_fields = jobset_crd_fields(parsed)
            shipped = f"charts/jobset/crds/{name}.x-k8s.io_{plural}.yaml"
            if tag.read(shipped) != content:
                problems.append(
                    f"{shipped} of jobset v{version} is not {path}: the CRD check before an upgrade reads the chart's"
                )
            same = [v for v, fields in adopted.items() if v != version and fields == schema_fields]
            if same:
                problems.append(
                    f"jobset v{version}'s CRD has the same fields of JobSet's own as {', '.join(same)}'s: the check "
                    "before an upgrade could not tell the two CRDs apart"
                )
        else:
            template = tag.read(f"charts/kueue/templates/crd/kueue.x-k8s.io_{plural}.yaml")
            why = "does not render it" if template is None else template_problem(template, parsed)
            if why:
                problems.append(
                    f"the kueue v{version} chart's templates/crd/ {why} ({plural}): an upgrade of the release would "
                    "not apply it"
                )
    script = (tag.read(PACKAGING) or b"").decode(errors="replace")
    if not chart_checked and not all(line in script for line in PUBLISHED_AS):
        problems.append(
            f"{PACKAGING} of {name} v{version} no longer shows that the chart is published as {version} (the tag "
            f"without its v), the version the stack gives Helm: check `helm show chart {CHARTS[name]} --version "
            f"{version}`, then adopt with --chart-checked"
        )
    if name == "kueue":
        values = _load(tag.read("charts/kueue/values.yaml") or b"", f"charts/kueue/values.yaml of kueue v{version}")
        for value in CHART_VALUES["kueue"]:
            if not _has_path(values or {}, value):
                problems.append(f"the kueue v{version} chart's values.yaml has no {'.'.join(value)}, which tpu-rl sets")
    facts, missing = extract(name, version, tag.read)
    manager = configuration(*SAMPLE_TIMEOUTS) if name == "kueue" else None
    return files, schema_fields, facts, problems + missing + fact_problems(name, version, facts, manager)


# ---------------------------------------------------------------------------------------------
# Writing what was read


def write(  # noqa: PLR0913 (what was read, and where it goes)
    name: Controller,
    version: str,
    commit: str,
    crds: dict[str, bytes],
    schema_fields: frozenset[str],
    facts: dict[str, Any],
    vendor: Path,
    data: Path,
) -> None:
    """The vendored files (the release's folder written afresh: its CRDs and its facts) with their SHA256SUMS lines
    and README rows, and the release's entry of the data."""
    readme = vendor / "README.md"
    rows = readme.read_text().splitlines()
    folder = f"schemas/{name}-v{version}/"
    rows = [r for r in rows if not r.startswith(f"| `{folder}")]
    last = max((i for i, r in enumerate(rows) if r.startswith("| `schemas/")), default=None)
    if last is None:
        raise AdoptError(f"{readme} has no row of a vendored schema to put the new rows after")
    upstream = f"kubernetes-sigs/{name}"
    vendored = {plural: crd_file(name, version, plural) for plural in crds}
    sums = {vendored[plural]: sha256(content) for plural, content in crds.items()}
    new_rows = [
        f"| `{vendored[plural]}.xz` | {upstream} | `{CRD_DIR}/{name}.x-k8s.io_{plural}.yaml` | v{version} | {commit} | "
        f"{git_blob(content)} | {LICENCE} |"
        for plural, content in crds.items()
    ]
    facts_path = facts_file(name, version)
    document = {"about": ABOUT, "upstream": upstream, "tag": f"v{version}", "commit": commit, "licence": LICENCE}
    content = (json.dumps(document | facts, indent=1) + "\n").encode()
    sums[facts_path] = sha256(content)
    sources = ", ".join(f"`{path}`" for path in facts["sources"])
    new_rows.append(
        f"| `{facts_path}` | {upstream} | facts extracted from {sources} (not source) | v{version} | {commit} | | "
        f"{LICENCE} |"
    )
    shutil.rmtree(vendor / folder, ignore_errors=True)
    (vendor / folder).mkdir(parents=True)
    for plural, crd in crds.items():
        (vendor / (vendored[plural] + ".xz")).write_bytes(compressed(crd))
    (vendor / facts_path).write_bytes(content)
    merge_sums(vendor / "SHA256SUMS", sums, lambda vendored_name: vendored_name.startswith(folder))
    readme.write_text("\n".join([*rows[: last + 1], *new_rows, *rows[last + 1 :]]) + "\n")
    releases = json.loads(data.read_text())
    entry: dict[str, Any] = {"commit": commit, "crds": vendored}
    if name == "jobset":
        entry["schemaFields"] = sorted(schema_fields)
    entry["facts"] = facts_path
    releases[name] = dict(sorted({**releases[name], version: entry}.items(), key=lambda kv: _numbers(kv[0])))
    data.write_text(json.dumps(releases, indent=1) + "\n")


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def changes(name: Controller, version: str, crds: dict[str, bytes], vendor: Path, data: Path) -> list[str]:
    """Each CRD's fields added and removed against the newest release adopted before this one."""
    adopted = json.loads(data.read_text())[name]
    before = [v for v in adopted if _numbers(v) < _numbers(version)]
    if not before:
        return [f"{name} v{version} is the oldest release adopted: nothing to compare"]
    previous = max(before, key=_numbers)
    lines = [f"against {name} {previous}:"]
    for plural, content in crds.items():
        old_file = vendor / (adopted[previous]["crds"][plural] + ".xz")
        old = _fields(name, parse_yaml(lzma.decompress(old_file.read_bytes())) or {})
        new = _fields(name, parse_yaml(content) or {})
        added, removed = sorted(new - old), sorted(old - new)
        lines.append(f"  {plural}: fields added {', '.join(added) or 'none'}; removed {', '.join(removed) or 'none'}")
    return lines


def adopt(
    name: Controller,
    version: str,
    repo: Path | None,
    url: str | None = None,
    vendor: Path = VENDOR_DIR,
    data: Path = DATA,
    chart_checked: bool = False,
) -> int:
    """The whole adoption (the module's docstring); the exit status."""
    tag = Tag(repo if repo is not None else clone(name, version, url or URL.format(name=name)), f"v{version}")
    commit = tag.commit()
    adopted = {v: frozenset(e.get("schemaFields", ())) for v, e in json.loads(data.read_text())[name].items()}
    crds, schema_fields, facts, problems = check(name, version, tag, adopted, chart_checked)
    if problems:
        for problem in problems:
            print(f"adopt_controller: {problem}", file=sys.stderr)
        return 1
    lines = changes(name, version, crds, vendor, data)
    write(name, version, commit, crds, schema_fields, facts, vendor, data)
    print(f"{name} {version}: tag v{version} is {commit}")
    folder = f"tests/data/vendor/schemas/{name}-v{version}/"
    print(f"wrote {', '.join(sorted(crds))} and facts.json under {folder}, and {name} {version} in {data.name}")
    for line in lines:
        print(line)
    print(NEXT)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.adopt_controller", description=__doc__.split("\n", 1)[0])
    parser.add_argument("name", help="jobset or kueue")
    parser.add_argument("version", help="the release, e.g. 0.17.8 (its tag is v0.17.8)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--repo", type=Path, help="a git clone or bare mirror holding the tag (no network)")
    source.add_argument("--url", help=f"where to clone the tag from (default {URL.format(name='NAME')})")
    parser.add_argument(
        "--chart-checked",
        action="store_true",
        help="the chart is published as VERSION (helm show chart ... --version VERSION), whatever the release's "
        "packaging script says",
    )
    args = parser.parse_args(argv)
    problems = []
    if args.name not in CONTROLLERS:
        problems.append(f"{args.name!r} is not one of {', '.join(CONTROLLERS)}")
    if not VERSION.fullmatch(args.version):
        problems.append(f"version {args.version!r} is not a release number like 0.17.8")
    if args.repo is not None and not args.repo.is_dir():
        problems.append(f"--repo {args.repo} is not a folder")
    return run(
        "adopt_controller",
        problems,
        lambda: adopt(args.name, args.version, args.repo, args.url, chart_checked=args.chart_checked),
    )


if __name__ == "__main__":
    entry_point(main)
