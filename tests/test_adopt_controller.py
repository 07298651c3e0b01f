"""`make controller`: a JobSet or Kueue release adopted by one command (tools/adopt_controller.py), and the data it
wrote being what the configuration, the `up` checks, the policy pack and the tests read.

The command runs on real git repositories made here from the releases' own CRDs (vendored, byte for byte upstream)
and Go files written here from each release's committed facts (``go_sources``: our text, shaped as the facts say):
adopting the same release again makes the same data, files, facts, sums and README rows as the ones committed, and
every check that must hold in a release's tree refuses, in one line, a tree where it does not (nothing written).
The committed facts are then checked against the stacks offline; tests/test_controller_facts.py tests the
extraction itself on Go snippets."""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import json
import lzma
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.controller_strings import KUBERNETES_MINORS, STRINGS, checked_sources
from core.controllers import (
    CHART_VALUES,
    CRDS,
    DATA,
    JOBSET_SCHEMA_FIELDS,
    JOBSET_VERSIONS,
    KUEUE_VERSIONS,
    RELEASES,
    RELIED_ON,
    Controller,
    facts_file,
    load,
)
from core.kueue_manager import configuration
from infra.k8s.kueue import manager_config
from infra.k8s.manifests import jobset_crd_fields
from tests.conftest import release_crd, shared_path
from tests.lifecycle_walk import settings
from tools import adopt_controller
from tools.adopt_controller import CRD_DIR, LICENCE, PACKAGING, AdoptError, adopt, main
from tools.controller_facts import (
    CONFIGURATION_TYPES,
    FAILURE_POLICY,
    FRAMEWORK_FILES,
    GO_MOD,
    JOBSET_WEBHOOK,
    configuration_problems,
    fact_problems,
    framework_problems,
    key_problems,
    kubernetes_minor,
    string_problems,
    unknown_fields,
)
from tools.stack_files import ROOT

pytestmark = pytest.mark.slow

VENDOR = Path(__file__).parent / "data" / "vendor"
PACKAGING_SCRIPT = b"""#!/usr/bin/env bash
GIT_TAG=${GIT_TAG:-$(git describe --tags --dirty --always)}
chart_version="${GIT_TAG/#v/}"
${HELM} package --version "${chart_version}" --app-version "${GIT_TAG}" charts/kueue -d "${DEST_CHART_DIR}"
"""
"""The lines of both projects' ``hack/helm-chart-package.sh`` (v0.10.1 to v0.19.2) that say the chart's version."""


@pytest.fixture(autouse=True)
def quick_xz(monkeypatch):
    """xz's fastest preset: the tests compare what the files decompress to, and xz -9e takes seconds per CRD."""
    monkeypatch.setattr(adopt_controller, "compressed", lambda content: lzma.compress(content, preset=0))


PARSE = adopt_controller.parse_yaml
PARSED: dict[bytes | str, Any] = {}
"""Each YAML text the command read, parsed: most tests adopt from the same CRDs (JobSet's is 0.8 MB, about 35 ms of
CPU to parse), and neither the command nor these tests change a document it returns."""


def parsed(content: bytes | str) -> Any:
    """``content`` as the command's YAML parser (``parse_yaml``) reads it, parsed once per distinct text in this
    module; a text that is not YAML raises each time, as it does. Not to be changed: copy it first."""
    if content not in PARSED:
        PARSED[content] = PARSE(content)
    return PARSED[content]


@pytest.fixture(autouse=True)
def parsed_once(monkeypatch):
    monkeypatch.setattr(adopt_controller, "parse_yaml", parsed)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def release_repo(root: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A git repository whose tag ``v<version>`` holds ``files``: one commit on ``main`` (its HEAD) and a lightweight
    tag, written uncompressed by ``git fast-import``: two git processes, where init, add, commit and tag would be
    four spending most of their CPU compressing the CRDs."""
    repo = root / f"{name}-src"
    subprocess.run(["git", "init", "--quiet", "--template=", "--initial-branch=main", str(repo)], check=True)
    stream = bytearray()
    for mark, content in enumerate(files.values(), start=1):
        stream += b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(content), content)
    message = f"v{version}".encode()
    stream += b"commit refs/heads/main\nmark :%d\n" % (len(files) + 1)
    stream += b"committer t <t@t> 1764547200 +0000\ndata %d\n%s\n" % (len(message), message)
    for mark, path in enumerate(files, start=1):
        stream += b"M 100644 :%d %s\n" % (mark, path.encode())
    stream += b"\nreset refs/tags/v%s\nfrom :%d\n\n" % (version.encode(), len(files) + 1)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "pack.compression=0", "fast-import", "--quiet"], input=bytes(stream), check=True
    )
    return repo


def release_facts(name: str, version: str) -> dict[str, Any]:
    """The committed facts of an adopted release's Go source."""
    return json.loads(shared_path(*RELEASES[name][version].facts.split("/")).read_text())  # type: ignore[index]


def go_sources(facts: dict[str, Any]) -> dict[str, bytes]:
    """Go files that say what ``facts`` say, each constant and use at its line (our text, not the release's): the
    key constants as ``const`` lines, the uses as the code matched, each word the rules match as a literal at its
    line, the Configuration as one struct per object listed, each integration's ``FrameworkName`` in a ``var``
    block; JobSet's ``go.mod`` requiring its ``k8s.io/api``, its webhook's accepted reasons, its matching code."""
    lines: dict[str, dict[int, list[str]]] = {}
    keys = facts["keys"]
    for constant, said in keys["constants"].items():
        lines.setdefault(said["file"], {}).setdefault(said["line"], []).append(f'const {constant} = "{said["value"]}"')
    for use in keys["uses"].values():
        for found in use["found"].values():
            for at in found:
                lines.setdefault(use["file"], {}).setdefault(at["line"], []).append(at["code"])
    for file, literals in facts.get("strings", {}).items():
        for literal, line in literals.items():
            lines.setdefault(file, {}).setdefault(line, []).append(f"_ = {json.dumps(literal)}")
    for found in (facts.get("failurePolicy") or {"found": {}})["found"].values():
        lines.setdefault(FAILURE_POLICY, {}).setdefault(found["line"], []).append(found["code"])
    files = {
        path: "".join("; ".join(dict.fromkeys(by_line.get(n, []))) + "\n" for n in range(1, max(by_line) + 1)).encode()
        for path, by_line in lines.items()
    }
    if "configuration" in facts:
        files[CONFIGURATION_TYPES] = go_configuration(facts["configuration"]).encode()
    for where, framework in facts.get("frameworks", {}).items():
        files[where] = f'var (\n\tFrameworkName = "{framework}"\n)\n'.encode()
    if "kubernetesApi" in facts:
        files[GO_MOD] = (
            f"module sigs.k8s.io/jobset\n\nrequire k8s.io/api {facts['kubernetesApi']['version']}\n".encode()
        )
    if "jobFailureReasons" in facts:
        listed = "".join(f"\tbatchv1.{name},\n" for name in facts["jobFailureReasons"]["accepted"])
        files[JOBSET_WEBHOOK] = f"var validOnJobFailureReasons = []string{{\n{listed}}}\n".encode()
    return files


def go_configuration(facts: dict[str, Any]) -> str:
    """One Go struct per object the Configuration facts list (``closed``), its fields as the facts type them."""
    structs: dict[str, list[str]] = {}
    for at in facts["closed"]:
        name = facts["type"] if at == "" else facts["fields"][at].removeprefix("*")
        children = [path for path in facts["fields"] if (path.rpartition(".")[0]) == at]
        structs.setdefault(name, [])
        for path in children:
            json_name = path.rpartition(".")[2]
            structs[name].append(
                f'\t{json_name[0].upper()}{json_name[1:]} {facts["fields"][path]} `json:"{json_name}"`'
            )
    return "".join(
        f"type {name} struct {{\n" + "".join(f"{f}\n" for f in body) + "}\n\n" for name, body in structs.items()
    )


def upstream_files(name: str, version: str) -> dict[str, bytes]:
    """The release's files the command reads: its vendored CRDs, Go files written from its facts (the chart's values
    as real as needed); the caller's own dict."""
    return dict(_upstream_files(name, version))


@functools.cache
def _upstream_files(name: str, version: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {PACKAGING: PACKAGING_SCRIPT}
    for plural in CRDS[name]:  # type: ignore[index]
        crd = release_crd(name, version, plural).read_bytes()
        files[f"{CRD_DIR}/{name}.x-k8s.io_{plural}.yaml"] = crd
        if name == "jobset":
            files[f"charts/jobset/crds/{name}.x-k8s.io_{plural}.yaml"] = crd
        else:
            files[f"charts/kueue/templates/crd/kueue.x-k8s.io_{plural}.yaml"] = kueue_template(crd)
    files |= go_sources(release_facts(name, version))
    if name == "kueue":
        files["charts/kueue/values.yaml"] = yaml.safe_dump(
            {"controllerManager": {"nodeSelector": {}}, "managerConfig": {"controllerManagerConfigYaml": "x"}}
        ).encode()
    return files


def kueue_template(crd: bytes) -> bytes:
    """A CRD as Kueue's chart renders it (``charts/kueue/templates/crd/`` at v0.17.1): a generated header, the labels
    and the cert-manager annotation as Helm actions, the rest the CRD."""
    header = b"{{- /*\nCopyright The Kubernetes Authors.\n*/ -}}\n\n{{/* Code generated by yaml-processor. */}}\n\n"
    actions = (
        b'metadata:\n  labels:\n  {{- include "kueue.labels" . | nindent 4 }}\n  annotations:\n'
        b"    {{- if .Values.enableCertManager }}\n    cert-manager.io/inject-ca-from: '{{ .Release.Namespace }}/x'\n"
        b"    {{- end }}\n"
    )
    return header + crd.replace(b"metadata:\n  annotations:\n", actions, 1)


def vendored_copy(folder: Path, name: str = "jobset", version: str | None = None) -> tuple[Path, Path]:
    """A copy of what the command writes (the data, the vendored folder) in ``folder``, with one release taken out
    (none without a version)."""
    vendor = folder / "vendor"
    shutil.copytree(VENDOR, vendor, ignore=shutil.ignore_patterns("maxtext-*"))
    data = folder / "controllers.json"
    shutil.copy(DATA, data)
    if version is None:
        return vendor, data
    releases = json.loads(data.read_text())
    entry = releases[name].pop(version)
    data.write_text(json.dumps(releases, indent=1) + "\n")
    recorded = [*entry["crds"].values(), entry["facts"]]
    files = [*(f"{crd}.xz" for crd in entry["crds"].values()), entry["facts"]]
    sums = [line for line in (vendor / "SHA256SUMS").read_text().splitlines() if line.split("  ")[1] not in recorded]
    (vendor / "SHA256SUMS").write_text("".join(f"{line}\n" for line in sums))
    rows = [r for r in (vendor / "README.md").read_text().splitlines() if not any(f"`{f}`" in r for f in files)]
    (vendor / "README.md").write_text("\n".join(rows) + "\n")
    for file in files:
        (vendor / file).unlink()
    return vendor, data


@pytest.fixture
def checkout(tmp_path):
    """``vendored_copy`` in the test's folder (once per test)."""
    return functools.partial(vendored_copy, tmp_path)


@dataclass(frozen=True)
class Adoption:
    """An adoption of a release from its own files, as committed, and what it printed."""

    code: int
    out: str
    repo: Path
    vendor: Path
    data: Path


@pytest.fixture(scope="module")
def adopted(tmp_path_factory) -> Callable[[Controller, str], Adoption]:
    """Each release adopted again from its upstream files once in this module, into a vendored copy without it:
    the tests that read what one adoption wrote and printed share it, as they share its repository (none of them
    writes to either)."""
    done: dict[tuple[str, str], Adoption] = {}

    def adoption(name: Controller, version: str) -> Adoption:
        if (name, version) not in done:
            folder = tmp_path_factory.mktemp(f"adopted-{name}-{version}")
            repo = release_repo(folder, name, version, upstream_files(name, version))
            vendor, data = vendored_copy(folder, name, version)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = adopt(name, version, repo, vendor=vendor, data=data)
            done[name, version] = Adoption(code, out.getvalue(), repo, vendor, data)
        return done[name, version]

    return adoption


def _committed_without_commits(text: str, commits: set[str]) -> str:
    for commit in commits:
        text = text.replace(commit, "<commit>")
    return text


@pytest.mark.parametrize(
    ("name", "version"), [("jobset", "0.12.0"), ("jobset", "0.10.1"), ("kueue", "0.17.1"), ("kueue", "0.17.8")]
)
def test_adopting_a_release_again_makes_what_is_committed(adopted, name, version):
    adoption = adopted(name, version)
    repo, vendor, data = adoption.repo, adoption.vendor, adoption.data
    assert adoption.code == 0
    out = adoption.out
    head = _git(repo, "rev-parse", "HEAD")
    assert f"{name} {version}: tag v{version} is {head}" in out

    made, committed = json.loads(data.read_text()), json.loads(DATA.read_text())
    assert made[name][version].pop("commit") == head
    committed[name][version].pop("commit")
    assert made == committed, "the same entry, in the same place"
    facts_line = facts_file(name, version)
    assert [line for line in (vendor / "SHA256SUMS").read_text().splitlines() if not line.endswith(facts_line)] == [
        line for line in (VENDOR / "SHA256SUMS").read_text().splitlines() if not line.endswith(facts_line)
    ], "the same sums (the facts', which name the commit, aside)"
    commits = {RELEASES[name][version].commit, head}
    made_rows = _committed_without_commits((vendor / "README.md").read_text(), commits).splitlines()
    committed_rows = _committed_without_commits((VENDOR / "README.md").read_text(), commits).splitlines()
    assert sorted(made_rows) == sorted(committed_rows), "the same rows (the commit aside)"
    for file in committed[name][version]["crds"].values():
        assert (
            lzma.decompress((vendor / (file + ".xz")).read_bytes())
            == release_crd(name, version, file.rsplit("_", 1)[1].removesuffix(".yaml")).read_bytes()
        )
    facts = json.loads((vendor / facts_file(name, version)).read_text())
    assert facts.pop("commit") == head
    assert facts == {k: v for k, v in release_facts(name, version).items() if k != "commit"}, "the same facts"
    assert not [p for p in vendor.rglob("*") if p.name.endswith((".go", ".go.xz"))], "no Go source written"


def test_adopting_prints_the_schema_fields_that_changed(adopted):
    adoption = adopted("jobset", "0.12.0")
    assert adoption.code == 0
    out = adoption.out
    before = max((v for v in JOBSET_VERSIONS if v != "0.12.0"), key=lambda v: tuple(map(int, v.split("."))))
    added = sorted(JOBSET_SCHEMA_FIELDS["0.12.0"] - JOBSET_SCHEMA_FIELDS[before])
    assert f"against jobset {before}:\n  jobsets: fields added {', '.join(added) or 'none'}; removed none" in out
    assert before != "0.10.1" or {"spec.volumeClaimPolicies", "status.replicatedJobsStatus[].jobRestarts"} <= set(added)


def _edited(content: bytes, old: bytes, new: bytes) -> bytes:
    """``content`` with its one ``old`` replaced by ``new`` (an edit of the CRD's text: the rest of it byte for
    byte, and nothing parsed and written again)."""
    assert content.count(old) == 1, old
    return content.replace(old, new)


def _with_status_field(files: dict[str, bytes], field: str) -> dict[str, bytes]:
    """JobSet's files with one more status field in its CRD (and the chart's copy of it): an integer, the first of
    the properties of ``status`` (the schema's, the one key ``status`` at its indentation)."""
    properties = b"\n          status:\n            description: JobSetStatus defines the observed state of JobSet\n"
    properties += b"            properties:\n"
    added = b"              %s:\n                type: integer\n" % field.encode()
    content = _edited(files[f"{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml"], properties, properties + added)
    return files | {
        f"{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml": content,
        "charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml": content,
    }


def test_a_new_version_is_added_in_order_and_the_program_then_accepts_it(tmp_path, checkout):
    files = _with_status_field(upstream_files("jobset", "0.10.1"), "restartsAttempted")
    repo = release_repo(tmp_path, "jobset", "0.10.99", files)
    vendor, data = checkout()
    assert adopt("jobset", "0.10.99", repo, vendor=vendor, data=data) == 0
    versions = [*JOBSET_VERSIONS, "0.10.99"]
    assert list(json.loads(data.read_text())["jobset"]) == sorted(versions, key=lambda v: tuple(map(int, v.split("."))))
    adopted = load(data)["jobset"]["0.10.99"]
    assert adopted.schema_fields == JOBSET_SCHEMA_FIELDS["0.10.1"] | {"status.restartsAttempted"}
    assert (vendor / "schemas/jobset-v0.10.99/jobset.x-k8s.io_jobsets.yaml.xz").is_file()


def test_a_jobset_whose_crd_the_upgrade_check_cannot_tell_apart_is_refused(tmp_path, checkout, capsys):
    lines = _refused(tmp_path, capsys, "jobset", "0.12.1", upstream_files("jobset", "0.12.0"), checkout())
    assert lines == [
        "adopt_controller: jobset v0.12.1's CRD has the same fields of JobSet's own as 0.12.0's: the check before an "
        "upgrade could not tell the two CRDs apart"
    ]


def test_a_git_failure_is_said_as_git_says_it_not_as_a_missing_file(tmp_path, checkout):
    source = release_repo(tmp_path, "jobset", "0.12.0", upstream_files("jobset", "0.12.0"))
    _git(source, "config", "uploadpack.allowFilter", "true")
    partial = tmp_path / "partial.git"
    subprocess.run(
        ["git", "clone", "--quiet", "--bare", "--filter=blob:none", source.as_uri(), str(partial)], check=True
    )
    _git(partial, "config", "remote.origin.url", (tmp_path / "gone").as_uri())  # the network is gone
    vendor, data = checkout("jobset", "0.12.0")
    with pytest.raises(AdoptError) as failed:
        adopt("jobset", "0.12.0", partial, vendor=vendor, data=data)
    assert str(failed.value).startswith(f"git show v0.12.0:{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml in {partial} failed")
    assert "fatal:" in str(failed.value) and "\n" not in str(failed.value)


def _refused(tmp_path, capsys, name, version, files, vendor_data):
    repo = release_repo(tmp_path, name, version, files)
    vendor, data = vendor_data
    before = {p: p.read_bytes() for p in [data, *vendor.rglob("*")] if p.is_file()}
    assert adopt(name, version, repo, vendor=vendor, data=data) == 1
    after = {p: p.read_bytes() for p in [data, *vendor.rglob("*")] if p.is_file()}
    assert after == before, "nothing written"
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("adopt_controller: ") for line in lines)
    return lines


def test_a_crd_that_does_not_serve_the_stacks_api_is_refused(tmp_path, checkout, capsys):
    files = upstream_files("jobset", "0.12.0")
    crd = f"{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml"
    files[crd] = _edited(files[crd], b"\n    name: v1alpha2\n    schema:\n", b"\n    name: v1alpha3\n    schema:\n")
    lines = _refused(tmp_path, capsys, "jobset", "0.13.0", files, checkout("jobset", "0.12.0"))
    assert lines == [
        f"adopt_controller: {CRD_DIR}/jobset.x-k8s.io_jobsets.yaml of jobset v0.13.0 does not serve v1alpha2, the "
        "API the stack's objects use"
    ]


def test_a_jobset_chart_that_ships_another_crd_is_refused(tmp_path, checkout, capsys):
    files = upstream_files("jobset", "0.12.0")
    files["charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml"] = upstream_files("jobset", "0.10.1")[
        "charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml"
    ]
    lines = _refused(tmp_path, capsys, "jobset", "0.13.0", files, checkout("jobset", "0.12.0"))
    assert lines == [
        "adopt_controller: charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml of jobset v0.13.0 is not "
        f"{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml: the CRD check before an upgrade reads the chart's"
    ]


def test_a_kueue_release_is_refused_with_every_problem_at_once(tmp_path, checkout, capsys):
    files = upstream_files("kueue", "0.17.1")
    del files["charts/kueue/templates/crd/kueue.x-k8s.io_localqueues.yaml"]
    flavors = "charts/kueue/templates/crd/kueue.x-k8s.io_resourceflavors.yaml"
    files[flavors] = b"{{- if .Values.enableCRDs }}\n" + files[flavors] + b"{{- end }}\n"
    queues = "charts/kueue/templates/crd/kueue.x-k8s.io_clusterqueues.yaml"
    files[queues] = files[queues].replace(b"served: true", b"served: false")
    files["charts/kueue/values.yaml"] = b"controllerManager: {}\n"
    files[FRAMEWORK_FILES["jobset.x-k8s.io/jobset"]] = b'const FrameworkName = "jobset.x-k8s.io/jobset-v2"\n'
    source = files[CONFIGURATION_TYPES].decode()
    assert source.count('`json:"recoveryTimeout"`') == 1
    files[CONFIGURATION_TYPES] = source.replace('`json:"recoveryTimeout"`', '`json:"recovery"`').encode()
    lines = _refused(tmp_path, capsys, "kueue", "0.18.0", files, checkout("kueue", "0.17.1"))
    assert lines == [
        "adopt_controller: the kueue v0.18.0 chart's templates/crd/ renders it only under a condition "
        "(resourceflavors): an upgrade of the release would not apply it",
        "adopt_controller: the kueue v0.18.0 chart's templates/crd/ serves other versions or names than the CRD "
        "(clusterqueues): an upgrade of the release would not apply it",
        "adopt_controller: the kueue v0.18.0 chart's templates/crd/ does not render it (localqueues): an upgrade of "
        "the release would not apply it",
        "adopt_controller: the kueue v0.18.0 chart's values.yaml has no controllerManager.nodeSelector.*, which "
        "tpu-rl sets",
        "adopt_controller: the kueue v0.18.0 chart's values.yaml has no managerConfig.controllerManagerConfigYaml, "
        "which tpu-rl sets",
        "adopt_controller: kueue v0.18.0's Configuration has no waitForPodsReady.recoveryTimeout, which the stack's "
        "manager configuration sets (infra/k8s/kueue.py): Kueue would refuse to start",
        "adopt_controller: kueue v0.18.0 does not register the integration jobset.x-k8s.io/jobset in "
        "pkg/controller/jobs/jobset/jobset_controller.go, which the stack's manager configuration turns on: Kueue "
        "would refuse to start",
    ]


def test_without_a_repo_the_tag_alone_is_cloned_under_build(tmp_path, monkeypatch, adopted):
    repo = adopted("jobset", "0.12.0").repo
    monkeypatch.setattr(adopt_controller, "ROOT", tmp_path)
    vendor = tmp_path / "vendor"
    shutil.copytree(VENDOR, vendor, ignore=shutil.ignore_patterns("maxtext-*"))
    data = tmp_path / "controllers.json"
    shutil.copy(DATA, data)
    assert adopt("jobset", "0.12.0", None, url=repo.as_uri(), vendor=vendor, data=data) == 0
    assert (tmp_path / "build" / "jobset-v0.12.0.git").is_dir()
    assert json.loads(data.read_text()) == json.loads(DATA.read_text()) | {
        "jobset": {**json.loads(DATA.read_text())["jobset"], "0.12.0": json.loads(data.read_text())["jobset"]["0.12.0"]}
    }
    with pytest.raises(AdoptError) as refused:
        adopt("jobset", "0.13.0", None, url=repo.as_uri(), vendor=vendor, data=data)
    assert str(refused.value) == (
        f"cloning tag v0.13.0 of {repo.as_uri()} failed (fatal: Remote branch v0.13.0 not found in upstream origin): "
        "check the version, or pass --repo"
    )


def test_a_repository_without_the_tag_is_one_line(capsys, adopted):
    repo = adopted("jobset", "0.12.0").repo
    assert main(["jobset", "0.99.0", "--repo", str(repo)]) == 1
    assert capsys.readouterr().err == (
        f"adopt_controller: {repo} has no tag v0.99.0: check the version, or fetch its tags\n"
    )


def test_bad_arguments_exit_2_with_every_problem(tmp_path, capsys):
    assert main(["helm", "1.0", "--repo", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "adopt_controller: 'helm' is not one of jobset, kueue",
        "adopt_controller: version '1.0' is not a release number like 0.17.8",
        f"adopt_controller: --repo {tmp_path / 'none'} is not a folder",
    ]


# ---------------------------------------------------------------------------------------------
# The committed data, against the vendored files (no git)


def test_the_data_names_every_adopted_releases_files_and_fields():
    assert (tuple(RELEASES["jobset"]), tuple(RELEASES["kueue"])) == (JOBSET_VERSIONS, KUEUE_VERSIONS)
    for name, releases in RELEASES.items():
        for version, release in releases.items():
            assert set(release.crds) == set(CRDS[name]), (name, version)
            for plural in CRDS[name]:
                crd = parsed(release_crd(name, version, plural).read_bytes())
                assert crd["metadata"]["name"] == f"{plural}.{name}.x-k8s.io"
                if name == "jobset":
                    assert release.schema_fields == jobset_crd_fields(crd)
            facts = release_facts(name, version)
            assert release.facts == facts_file(name, version)
            assert (facts["upstream"], facts["tag"], facts["commit"], facts["licence"]) == (
                f"kubernetes-sigs/{name}",
                f"v{version}",
                release.commit,
                LICENCE,
            )
            assert ("configuration" in facts) == ("frameworks" in facts) == (name == "kueue")
    assert not [p for p in VENDOR.rglob("*") if ".go" in p.suffixes], "no Go source is vendored: its facts are"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_adopted_kueue_accepts_the_stacks_manager_configuration(stack):
    config = manager_config(settings(stack, []))
    for version in KUEUE_VERSIONS:
        facts = release_facts("kueue", version)["configuration"]
        assert configuration_problems(version, facts, config) == [], version
        assert framework_problems(version, release_facts("kueue", version)["frameworks"]) == [], version
        # what the strict decode would refuse is found: v1beta2 dropped waitForPodsReady.enable
        broken = configuration(1800, 1800)
        broken["waitForPodsReady"]["enable"] = True
        broken["integrations"]["frameworkz"] = []
        assert unknown_fields(broken, facts) == ["waitForPodsReady.enable", "integrations.frameworkz"]


def test_the_chart_values_tpu_rl_sets_are_the_ones_the_policy_allows():
    from infra.k8s.kueue import helm_values
    from policy.tpu_rl_policies.helm import _reviewed_value, _value_paths

    paths = list(_value_paths(helm_values(settings("prod", []))))
    assert paths and all(_reviewed_value(p, CHART_VALUES["kueue"]) for p in paths)
    assert all(not _reviewed_value(p, CHART_VALUES["jobset"]) for p in paths)


def test_a_chart_published_under_another_version_is_refused_unless_checked(tmp_path, checkout, capsys):
    files = upstream_files("jobset", "0.12.0")
    files[PACKAGING] = files[PACKAGING].replace(b'"${GIT_TAG/#v/}"', b'"${GIT_TAG}"')
    vendor_data = checkout("jobset", "0.12.0")
    lines = _refused(tmp_path, capsys, "jobset", "0.12.0", files, vendor_data)
    assert lines == [
        "adopt_controller: hack/helm-chart-package.sh of jobset v0.12.0 no longer shows that the chart is published "
        "as 0.12.0 (the tag without its v), the version the stack gives Helm: check `helm show chart "
        "oci://registry.k8s.io/jobset/charts/jobset --version 0.12.0`, then adopt with --chart-checked"
    ]
    vendor, data = vendor_data
    repo = tmp_path / "jobset-src"
    assert adopt("jobset", "0.12.0", repo, vendor=vendor, data=data, chart_checked=True) == 0


# ---------------------------------------------------------------------------------------------
# The controllers' labels and annotations the stack relies on (core.controllers.RELIED_ON)

DOMAINS = {"jobset": ("jobset.sigs.k8s.io/", "alpha.jobset.sigs.k8s.io/"), "kueue": ("kueue.x-k8s.io/",)}
FIELD_REF = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")
STACKS = (
    ("dev", ()),
    ("prod", ("tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true")),
    (
        "prod",
        (
            "tpu-rl:tpu.slices=2",
            "tpu-rl:training.iciExpertParallelism=1",
            "tpu-rl:training.rolloutTensorParallelism=32",
        ),
    ),
    ("prod", ("tpu-rl:kueue.enabled=false", "tpu-rl:kueue.queue=team-queue")),
)
"""Stacks between them making every kind of object the program builds: every step, one and two slices, the stack's
Kueue and another's queue."""


def _controller(key: str) -> str | None:
    return next((name for name, prefixes in DOMAINS.items() if key.startswith(prefixes)), None)


def _relied_on(value: object, path: tuple[object, ...] = ()) -> set[tuple[str | None, str, str]]:
    """Each controller's key an object relies on, and how: an env ``fieldRef`` reads a pod's label or annotation; a
    key the object sets is read by the controller, as ``RELIED_ON`` names it by where it is set (anywhere else: a use
    of its own, which no entry names)."""
    found: set[tuple[str | None, str, str]] = set()
    if isinstance(value, list):
        for index, item in enumerate(value):
            found |= _relied_on(item, (*path, index))
    if not isinstance(value, dict):
        return found
    ref = (value.get("fieldRef") or {}).get("fieldPath", "")
    if (match := FIELD_REF.fullmatch(ref)) and _controller(match[2]):
        found.add((_controller(match[2]), match[2], "pod label" if match[1] == "labels" else "pod annotation"))
    for kind in ("labels", "annotations"):
        for key in value.get(kind) or {} if path[-1:] == ("metadata",) else {}:
            if _controller(key):
                where = [p if isinstance(p, str) else "*" for p in path]
                use = {
                    ("labels", ("metadata",)): "object label",
                    ("annotations", ("spec", "replicatedJobs", "*", "template", "metadata")): "template annotation",
                }.get((kind, tuple(where)), f"{kind} at {'.'.join(where)}")
                found.add((_controller(key), key, use))
    for key, item in value.items():
        found |= _relied_on(item, (*path, key))
    return found


def test_the_keys_checked_are_every_one_the_manifests_and_readers_rely_on():
    """Derived from every object the program builds (each stack's steps, its flavors and queues) and the live
    readers' selectors: a manifest that starts relying on another key fails here until ``RELIED_ON`` names it, and
    ``make controller`` then checks it in every release."""
    from infra.k8s.kueue import cluster_queue, cpu_flavor, local_queue, tpu_flavor
    from infra.k8s.live_objects import JOB_UID_LABEL, JOBSET_LABEL
    from workloads.observe.startup import REPLICATED_JOB_LABEL
    from workloads.specs.step_specs import plan_workflow

    found: set[tuple[str | None, str, str]] = set()
    for stack, overrides in STACKS:
        config = settings(stack, list(overrides))
        for step in plan_workflow(config).steps:
            found |= _relied_on(step.manifest) | _relied_on(step.scripts)
        queues = [tpu_flavor(config, {}), cpu_flavor({}), cluster_queue(config, {}), local_queue(config, {})]
        found |= _relied_on(queues)
    found |= {
        ("jobset", JOBSET_LABEL, "pod label"),
        ("jobset", REPLICATED_JOB_LABEL, "pod label"),
        ("kueue", JOB_UID_LABEL, "workload label"),
    }
    assert found == {(name, key, use) for name, keys in RELIED_ON.items() for key, use in keys}
    assert ("jobset", "jobset.sigs.k8s.io/job-index", "pod label") in found, "MEGASCALE_SLICE_ID's fieldRef"


@pytest.mark.parametrize(("name", "version"), [(n, v) for n in RELEASES for v in RELEASES[n]])
def test_every_adopted_release_declares_and_uses_every_key_the_stack_relies_on(name, version):
    """On the facts the command extracted from the release's source (offline): a key ``RELIED_ON`` gains is checked
    in every adopted release without adopting it again."""
    keys = release_facts(name, version)["keys"]
    assert key_problems(name, version, keys) == []
    for key, use in RELIED_ON[name]:  # each key's constant, and where the release uses it so
        constants = [c for c, said in keys["constants"].items() if said["value"] == key]
        assert any(keys["uses"][use]["found"].get(c) for c in constants), (key, use)


FIX = "the stack cannot run on it as it is (core/controllers.py RELIED_ON)"


@pytest.mark.parametrize(
    ("name", "file", "old", "new", "said"),
    [
        (
            "jobset",
            "api/jobset/v1alpha2/jobset_types.go",
            b'JobIndexKey = "jobset.sigs.k8s.io/job-index"',
            b'JobIndexKey = "jobset.sigs.k8s.io/job-number"',
            "jobset v0.13.0 declares no jobset.sigs.k8s.io/job-index (api/jobset/v1alpha2/jobset_types.go, "
            f"pkg/constants/constants.go), which the stack relies on: {FIX}",
        ),
        (
            "jobset",
            "pkg/controllers/jobset_controller.go",
            b".Template.Annotations[jobset.ExclusiveKey]",
            b".Template.Labels[jobset.ExclusiveKey]",
            "jobset v0.13.0 does not read from a replicated Job's template alpha.jobset.sigs.k8s.io/exclusive-topology "
            f"(ExclusiveKey in pkg/controllers/jobset_controller.go), which the stack relies on: {FIX}",
        ),
        (
            "kueue",
            "pkg/controller/constants/constants.go",
            b'QueueLabel = "kueue.x-k8s.io/queue-name"',
            b'QueueLabel = "kueue.x-k8s.io/queue"',
            "kueue v0.18.0 declares no kueue.x-k8s.io/queue-name (pkg/controller/constants/constants.go), which the "
            f"stack relies on: {FIX}",
        ),
    ],
)
def test_a_release_without_a_key_the_stack_relies_on_is_refused(tmp_path, checkout, capsys, name, file, old, new, said):
    base = "0.12.0" if name == "jobset" else "0.17.8"
    files = upstream_files(name, base)
    assert files[file].count(old) >= 1, "the doctored line says what the release's facts say"
    files[file] = files[file].replace(old, new)
    version = "0.13.0" if name == "jobset" else "0.18.0"
    assert _refused(tmp_path, capsys, name, version, files, checkout(name, base)) == [f"adopt_controller: {said}"]


def test_a_release_without_the_files_that_say_the_keys_is_refused(tmp_path, checkout, capsys):
    files = upstream_files("jobset", "0.12.0")
    del files["pkg/controllers/jobset_controller.go"]
    lines = _refused(tmp_path, capsys, "jobset", "0.13.0", files, checkout("jobset", "0.12.0"))
    assert lines == [
        "adopt_controller: jobset v0.13.0 has no pkg/controllers/jobset_controller.go, where tpu-rl checks the keys "
        "its objects rely on"
    ]


# ---------------------------------------------------------------------------------------------
# The words of the controllers the stack's rules match (core.controller_strings.STRINGS)

SUBJECT_FIELDS = frozenset({"reason", "message", "type", "phase", "terminal_state"})
"""A controller's words in the objects the readers parse (``infra.k8s.live_objects``): a condition's type, reason
and message, an event's reason and message, a pod's phase, a JobSet's terminal state."""
SUBJECT_NAMES = frozenset({"reason", "reasons", "message"})
"""Local names the rules give those words (``reason = event.reason``; ``reasons``: an event reason -> its message)."""
COLLECTIONS = frozenset({"reasons"})
"""Of those, the ones that hold whole words: a string ``in`` one is one of them, not a part of one."""
RULE_FILES = ("workloads/observe", "workloads/reader.py", "infra/k8s", "core")
NOT_CONTROLLER_WORDS: dict[tuple[str, str], str] = {
    ("infra/k8s/read_errors.py", "SSLError"): "the kubernetes client's own reason of a TLS failure (ApiException)",
}
"""Strings a rule compares with a ``reason`` or ``message`` that no controller writes: (file, string) -> whose."""


def _module_strings(tree: ast.Module) -> dict[str, ast.expr]:
    """The module's names bound once to a value at its top level (the tuples of words, the compiled patterns), and
    those it imports from ``core.controller_strings`` (their values, as constants)."""
    import core.controller_strings as table

    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == table.__name__:
            for alias in node.names:
                value = getattr(table, alias.name)
                if isinstance(value, str | tuple):
                    words = [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
                    found[alias.asname or alias.name] = ast.Tuple(elts=[ast.Constant(word) for word in words])
        if isinstance(node, ast.Assign):
            found |= {target.id: node.value for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


class RuleWords(ast.NodeVisitor):
    """Each string a module's rules match in a controller's words, and how: compared with one (``==``, ``in``),
    looked up as a condition's type (``true_condition``, ``any_condition``), a prefix (``startswith``), a regular
    expression searched in one (``re.search``, a compiled pattern's ``match``), a key of a dict looked up by one. A
    loop's or a comprehension's name stands for the strings it iterates over."""

    def __init__(self, tree: ast.Module) -> None:
        self.module = _module_strings(tree)
        self.scopes: list[dict[str, ast.expr]] = [{}]
        self.found: set[tuple[str, str]] = set()

    def strings(self, node: ast.AST | None, depth: int = 0) -> list[str]:
        if node is None or depth > 4:
            return []
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return [s for element in node.elts for s in self.strings(element, depth + 1)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile":
            return self.strings(node.args[0], depth + 1) if node.args else []
        if isinstance(node, ast.Name):
            bound = next((scope[node.id] for scope in reversed(self.scopes) if node.id in scope), None)
            return self.strings(bound if bound is not None else self.module.get(node.id), depth + 1)
        return []

    def subject(self, node: ast.AST) -> bool:
        """Whether ``node`` reads a controller's words (a loop's name over strings does not)."""
        for part in ast.walk(node):
            if isinstance(part, ast.Attribute) and part.attr in SUBJECT_FIELDS:
                return True
            if isinstance(part, ast.Name) and part.id in SUBJECT_NAMES and not self.strings(part):
                return True
        return False

    def add(self, node: ast.AST | None, how: str) -> None:
        self.found |= {(text, how) for text in self.strings(node)}

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.scopes.append({node.target.id: node.iter} if isinstance(node.target, ast.Name) else {})
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)
        self.scopes.pop()

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        scope: dict[str, ast.expr] = {}
        for generator in node.generators:
            self.visit(generator.iter)
            if isinstance(generator.target, ast.Name):
                scope[generator.target.id] = generator.iter
        self.scopes.append(scope)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in [*parts, *(test for generator in node.generators for test in generator.ifs)]:
            self.visit(part)
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension  # noqa: N815

    def visit_Compare(self, node: ast.Compare) -> None:
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
            inside = isinstance(op, ast.In | ast.NotIn) and not (
                isinstance(right, ast.Name) and right.id in COLLECTIONS
            )
            if self.subject(right) and not self.subject(left):
                self.add(left, "contains" if inside else "equals")
            elif self.subject(left) and not self.subject(right):
                self.add(right, "equals")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func, args = node.func, node.args
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = func.value if isinstance(func, ast.Attribute) else None
        if name in ("true_condition", "any_condition") and len(args) >= 2:
            self.add(args[1], "equals")
        elif name in ("startswith", "endswith") and owner is not None and self.subject(owner):
            self.add(args[0] if args else None, "prefix")
        elif name in ("search", "match", "fullmatch") and isinstance(owner, ast.Name) and owner.id == "re":
            if len(args) >= 2 and self.subject(args[1]):
                self.add(args[0], "searched")
        elif name in ("search", "match", "fullmatch") and owner is not None and args and self.subject(args[0]):
            self.add(owner, "searched")
        elif name == "get" and isinstance(owner, ast.Dict) and args and self.subject(args[0]):
            keys = [key for key in owner.keys if key is not None]
            self.found |= {(key, "equals") for key in self.strings(ast.Tuple(elts=keys))}
        elif name == "get" and owner is not None and self.subject(owner) and args:
            self.add(args[0], "equals")
        self.generic_visit(node)


def _manifest_words(value: object) -> set[tuple[str, str]]:
    """The strings the steps' failure policies match: a Job's failure reasons and message patterns (JobSet), a
    pod's condition types (the Job controller)."""
    found: set[tuple[str, str]] = set()
    if isinstance(value, list):
        for item in value:
            found |= _manifest_words(item)
    if isinstance(value, dict):
        found |= {(reason, "equals") for reason in value.get("onJobFailureReasons") or []}
        found |= {(pattern, "searched") for pattern in value.get("onJobFailureMessagePatterns") or []}
        found |= {(c["type"], "equals") for c in value.get("onPodConditions") or [] if isinstance(c, dict)}
        for item in value.values():
            found |= _manifest_words(item)
    return found


def test_every_word_the_rules_match_is_a_row_of_the_table_and_every_row_is_matched():
    """Derived from the rule modules' code and every step's manifest (dev's and prod's): a rule that starts matching a
    controller's word fails here until ``core/controller_strings.py`` has its row (and so ``make controller`` checks
    it in every release), and a row no rule matches any more fails too."""
    from tests.source_files import parsed
    from workloads.specs.step_specs import plan_workflow

    found: set[tuple[str, str, str]] = set()
    files = [
        p for entry in RULE_FILES for p in ([ROOT / entry] if entry.endswith(".py") else (ROOT / entry).glob("*.py"))
    ]
    for path in files:
        rel = str(path.relative_to(ROOT))
        if rel == "core/controller_strings.py":
            continue
        visitor = RuleWords(parsed(path))
        visitor.visit(parsed(path))
        found |= {(rel, text, how) for text, how in visitor.found if (rel, text) not in NOT_CONTROLLER_WORDS}
    for stack in ("dev", "prod"):
        for step in plan_workflow(settings(stack, [])).steps:
            found |= {("workloads/specs/step_manifests.py", *word) for word in _manifest_words(step.manifest)}
    table = {(rule, row.text, row.how) for row in STRINGS for rule in row.rules}
    assert sorted(found - table) == [], "matched by a rule, not a row of core/controller_strings.py"
    assert sorted(table - found) == [], "a row no rule matches"


@pytest.mark.parametrize(("name", "version"), [(n, v) for n in RELEASES for v in RELEASES[n]])
def test_every_adopted_release_writes_every_word_the_rules_match(name, version):
    """On the facts the command extracted from the release's source (offline): each literal of each row is in its
    file, JobSet's webhook accepts the failure policy's reasons and it matches them as the rules rely on."""
    facts = release_facts(name, version)
    assert set(facts["strings"]) == set(checked_sources(name))
    assert string_problems(name, version, facts["strings"]) == []
    assert fact_problems(name, version, facts, configuration(1800, 1800) if name == "kueue" else None) == []
    if name == "jobset":
        assert kubernetes_minor(facts["kubernetesApi"]["version"]) in KUBERNETES_MINORS


def test_facts_that_say_a_word_is_no_longer_written_fail_in_one_line():
    facts = release_facts("kueue", "0.17.8")
    facts["strings"]["pkg/scheduler/flavorassigner/flavorassigner.go"][
        "insufficient unused quota for %s in flavor %s, %s more needed"
    ] = 0
    assert fact_problems("kueue", "0.17.8", facts, None) == [
        "kueue v0.17.8 no longer writes 'insufficient unused quota for %s in flavor %s, %s more needed' in "
        "pkg/scheduler/flavorassigner/flavorassigner.go, from which the rules of workloads/observe/live_state.py match "
        "'insufficient unused quota' (a Workload's QuotaReserved message): read what it writes now, then change those "
        "rules and core/controller_strings.py"
    ]


def _words_changed(files: dict[str, bytes], file: str, old: str, new: str) -> dict[str, bytes]:
    content = files[file].decode()
    assert content.count(old) == 1, old
    return files | {file: content.replace(old, new).encode()}


def test_a_kueue_release_that_no_longer_writes_a_word_the_rules_match_is_refused(tmp_path, checkout, capsys):
    files = _words_changed(
        upstream_files("kueue", "0.17.8"),
        "pkg/controller/jobframework/reconciler.go",
        '"FailedToStart"',
        '"NotStarted"',
    )
    lines = _refused(tmp_path, capsys, "kueue", "0.18.0", files, checkout("kueue", "0.17.8"))
    assert lines == [
        "adopt_controller: kueue v0.18.0 no longer writes 'FailedToStart' in "
        "pkg/controller/jobframework/reconciler.go, from which the rules of workloads/observe/live_state.py, "
        "workloads/observe/waiting.py match 'FailedToStart' (a Workload's Finished reason): read what it writes now, "
        "then change those rules and core/controller_strings.py"
    ]


def test_a_jobset_release_built_with_another_kubernetes_or_refusing_a_reason_is_refused(tmp_path, checkout, capsys):
    files = upstream_files("jobset", "0.12.0")
    files = _words_changed(files, GO_MOD, "k8s.io/api v0.36.0", "k8s.io/api v0.37.0")
    files = _words_changed(files, JOBSET_WEBHOOK, "\tbatchv1.JobReasonPodFailurePolicy,\n", "")
    files = _words_changed(files, "api/jobset/v1alpha2/jobset_types.go", '"Completed"', '"Succeeded"')
    lines = _refused(tmp_path, capsys, "jobset", "0.13.0", files, checkout("jobset", "0.12.0"))
    assert lines == [
        "adopt_controller: jobset v0.13.0 no longer writes 'Completed' in api/jobset/v1alpha2/jobset_types.go, from "
        "which the rules of workloads/observe/live_state.py, workloads/observe/startup.py match 'Completed' (a "
        "JobSet's condition type and terminalState): read what it writes now, then change those rules and "
        "core/controller_strings.py",
        "adopt_controller: jobset v0.13.0 builds with Kubernetes 1.37 (go.mod: k8s.io/api v0.37.0), where the "
        "Kubernetes words the stack's rules match were not read (core/controller_strings.py KUBERNETES_MINORS: "
        f"{', '.join(KUBERNETES_MINORS)}): read their sources at 1.37, then add it",
        "adopt_controller: jobset v0.13.0's webhook does not accept the Job failure reason PodFailurePolicy (batchv1."
        "JobReasonPodFailurePolicy is not in validOnJobFailureReasons, pkg/webhooks/jobset_webhook.go), which the "
        "training JobSet's failure policy names: it would refuse every training step "
        "(workloads/specs/step_manifests.py)",
    ]
