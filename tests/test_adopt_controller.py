"""`make controller`: a JobSet or Kueue release adopted by one command (tools/adopt_controller.py), and the data it
wrote being what the configuration, the `up` checks, the policy pack and the tests read.

The command runs on real git repositories made here from the releases' own files (the vendored CRDs and Kueue's
Configuration types, byte for byte upstream): adopting the same release again makes the same data, files, sums and
README rows as the ones committed, and every check that must hold in a release's tree refuses, in one line, a tree
where it does not (nothing written)."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from core.controllers import (
    CHART_VALUES,
    CRDS,
    DATA,
    JOBSET_SPEC_FIELDS,
    JOBSET_VERSIONS,
    KUEUE_VERSIONS,
    RELEASES,
    load,
)
from infra.k8s.kueue import configuration, manager_config
from infra.k8s.manifests import jobset_crd_fields
from tests.conftest import release_crd, shared_path
from tests.lifecycle_walk import settings
from tools import adopt_controller
from tools.adopt_controller import (
    CONFIGURATION_TYPES,
    CRD_DIR,
    PACKAGING,
    AdoptError,
    adopt,
    go_structs,
    main,
    unknown_fields,
)

VENDOR = Path(__file__).parent / "data" / "vendor"
PACKAGING_SCRIPT = b"""#!/usr/bin/env bash
GIT_TAG=${GIT_TAG:-$(git describe --tags --dirty --always)}
chart_version="${GIT_TAG/#v/}"
${HELM} package --version "${chart_version}" --app-version "${GIT_TAG}" charts/kueue -d "${DEST_CHART_DIR}"
"""
"""The lines of both projects' ``hack/helm-chart-package.sh`` (v0.10.1 to v0.19.2) that say the chart's version."""
LOADER = yaml.CSafeLoader


@pytest.fixture(autouse=True)
def quick_xz(monkeypatch):
    """xz's fastest preset: the tests compare what the files decompress to, and xz -9e takes seconds per CRD."""
    monkeypatch.setattr(adopt_controller, "_compressed", lambda content: lzma.compress(content, preset=0))


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def release_repo(root: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A git repository whose tag ``v<version>`` holds ``files``."""
    repo = root / f"{name}-src"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    for path, content in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(content)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", f"v{version}")
    _git(repo, "tag", f"v{version}")
    return repo


def upstream_files(name: str, version: str) -> dict[str, bytes]:
    """The release's files the command reads, from their vendored copies (the chart's values as real as needed)."""
    release = RELEASES[name][version]  # type: ignore[index]
    files: dict[str, bytes] = {PACKAGING: PACKAGING_SCRIPT}
    for plural in CRDS[name]:  # type: ignore[index]
        crd = release_crd(name, version, plural).read_bytes()
        files[f"{CRD_DIR}/{name}.x-k8s.io_{plural}.yaml"] = crd
        if name == "jobset":
            files[f"charts/jobset/crds/{name}.x-k8s.io_{plural}.yaml"] = crd
        else:
            files[f"charts/kueue/templates/crd/kueue.x-k8s.io_{plural}.yaml"] = b"{{- if .Values.enableCRDs }}\n"
    if release.configuration:
        files[CONFIGURATION_TYPES] = shared_path(*release.configuration.split("/")).read_bytes()
        files["charts/kueue/values.yaml"] = yaml.safe_dump(
            {"controllerManager": {"nodeSelector": {}}, "managerConfig": {"controllerManagerConfigYaml": "x"}}
        ).encode()
    return files


@pytest.fixture
def checkout(tmp_path):
    """A copy of what the command writes (the data, the vendored folder), with one release taken out."""
    vendor = tmp_path / "vendor"
    shutil.copytree(VENDOR, vendor, ignore=shutil.ignore_patterns("maxtext-*"))
    data = tmp_path / "controllers.json"
    shutil.copy(DATA, data)

    def without(name: str, version: str) -> tuple[Path, Path]:
        releases = json.loads(data.read_text())
        entry = releases[name].pop(version)
        data.write_text(json.dumps(releases, indent=1) + "\n")
        files = [*entry["crds"].values(), *([entry["configuration"]] if "configuration" in entry else [])]
        sums = [line for line in (vendor / "SHA256SUMS").read_text().splitlines() if line.split("  ")[1] not in files]
        (vendor / "SHA256SUMS").write_text("".join(f"{line}\n" for line in sums))
        rows = [r for r in (vendor / "README.md").read_text().splitlines() if not any(f"`{f}.xz`" in r for f in files)]
        (vendor / "README.md").write_text("\n".join(rows) + "\n")
        for file in files:
            (vendor / (file + ".xz")).unlink()
        return vendor, data

    return without


def _committed_without_commits(text: str, commits: set[str]) -> str:
    for commit in commits:
        text = text.replace(commit, "<commit>")
    return text


@pytest.mark.parametrize(("name", "version"), [("jobset", "0.12.0"), ("jobset", "0.10.1"), ("kueue", "0.17.1")])
def test_adopting_a_release_again_makes_what_is_committed(tmp_path, checkout, capsys, name, version):
    repo = release_repo(tmp_path, name, version, upstream_files(name, version))
    vendor, data = checkout(name, version)
    assert adopt(name, version, repo, vendor=vendor, data=data) == 0
    out = capsys.readouterr().out
    assert f"{name} {version}: tag v{version} is {_git(repo, 'rev-parse', 'HEAD')}" in out

    made, committed = json.loads(data.read_text()), json.loads(DATA.read_text())
    assert made[name][version].pop("commit") == _git(repo, "rev-parse", "HEAD")
    committed[name][version].pop("commit")
    assert made == committed, "the same entry, in the same place"
    assert (vendor / "SHA256SUMS").read_text() == (VENDOR / "SHA256SUMS").read_text()
    commits = {RELEASES[name][version].commit, _git(repo, "rev-parse", "HEAD")}
    made_rows = _committed_without_commits((vendor / "README.md").read_text(), commits).splitlines()
    committed_rows = _committed_without_commits((VENDOR / "README.md").read_text(), commits).splitlines()
    assert sorted(made_rows) == sorted(committed_rows), "the same rows (the commit aside)"
    for file in committed[name][version]["crds"].values():
        assert (
            lzma.decompress((vendor / (file + ".xz")).read_bytes())
            == release_crd(name, version, file.rsplit("_", 1)[1].removesuffix(".yaml")).read_bytes()
        )


def test_adopting_prints_the_spec_fields_that_changed(tmp_path, checkout, capsys):
    repo = release_repo(tmp_path, "jobset", "0.12.0", upstream_files("jobset", "0.12.0"))
    vendor, data = checkout("jobset", "0.12.0")
    assert adopt("jobset", "0.12.0", repo, vendor=vendor, data=data) == 0
    out = capsys.readouterr().out
    before = max((v for v in JOBSET_VERSIONS if v != "0.12.0"), key=lambda v: tuple(map(int, v.split("."))))
    added = sorted(JOBSET_SPEC_FIELDS["0.12.0"] - JOBSET_SPEC_FIELDS[before])
    assert f"against jobset {before}:\n  jobsets: spec fields added {', '.join(added) or 'none'}; removed none" in out
    assert before != "0.10.1" or added == ["volumeClaimPolicies"]


def test_a_new_version_is_added_in_order_and_the_program_then_accepts_it(tmp_path, checkout):
    files = upstream_files("jobset", "0.12.0")
    repo = release_repo(tmp_path, "jobset", "0.11.1", files)
    vendor, data = checkout("jobset", "0.12.0")  # any copy: nothing taken out matters here
    assert adopt("jobset", "0.11.1", repo, vendor=vendor, data=data) == 0
    assert list(json.loads(data.read_text())["jobset"]) == ["0.10.1", "0.11.1"], "oldest first"
    adopted = load(data)["jobset"]["0.11.1"]
    assert adopted.spec_fields == JOBSET_SPEC_FIELDS["0.12.0"]
    assert (vendor / "schemas/jobset-v0.11.1/jobset.x-k8s.io_jobsets.yaml.xz").is_file()


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
    crd = yaml.load(files[f"{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml"], Loader=LOADER)
    crd["spec"]["versions"][0]["name"] = "v1alpha3"
    files[f"{CRD_DIR}/jobset.x-k8s.io_jobsets.yaml"] = yaml.dump(crd, Dumper=yaml.CSafeDumper).encode()
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
    files["charts/kueue/values.yaml"] = b"controllerManager: {}\n"
    source = files[CONFIGURATION_TYPES].decode()
    renamed = source.replace('`json:"recoveryTimeout,omitempty"`', '`json:"recovery,omitempty"`')
    files[CONFIGURATION_TYPES] = renamed.encode()
    lines = _refused(tmp_path, capsys, "kueue", "0.18.0", files, checkout("kueue", "0.17.1"))
    assert lines == [
        "adopt_controller: the kueue v0.18.0 chart does not render the CRDs of localqueues from templates/crd/: an "
        "upgrade of the release would not update them",
        "adopt_controller: the kueue v0.18.0 chart's values.yaml has no controllerManager.nodeSelector.*, which "
        "tpu-rl sets",
        "adopt_controller: the kueue v0.18.0 chart's values.yaml has no managerConfig.controllerManagerConfigYaml, "
        "which tpu-rl sets",
        "adopt_controller: kueue v0.18.0's Configuration has no waitForPodsReady.recoveryTimeout, which the stack's "
        "manager configuration sets (infra/k8s/kueue.py): Kueue would refuse to start",
    ]


def test_without_a_repo_the_tag_alone_is_cloned_under_build(tmp_path, monkeypatch):
    repo = release_repo(tmp_path, "jobset", "0.12.0", upstream_files("jobset", "0.12.0"))
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
                crd = yaml.load(release_crd(name, version, plural).read_text(), Loader=LOADER)
                assert crd["metadata"]["name"] == f"{plural}.{name}.x-k8s.io"
            if name == "jobset":
                assert release.spec_fields == jobset_crd_fields(
                    yaml.load(release_crd(name, version, "jobsets").read_text(), Loader=LOADER)
                )
            assert (release.configuration is not None) == (name == "kueue")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_adopted_kueue_accepts_the_stacks_manager_configuration(stack):
    config = manager_config(settings(stack, []))
    for version in KUEUE_VERSIONS:
        release = RELEASES["kueue"][version]
        assert release.configuration is not None
        structs = go_structs(shared_path(*release.configuration.split("/")).read_text())
        assert unknown_fields(config, "Configuration", structs) == [], version
        # what the strict decode would refuse is found: v1beta2 dropped waitForPodsReady.enable
        broken = configuration(1800, 1800)
        broken["waitForPodsReady"]["enable"] = True
        broken["integrations"]["frameworkz"] = []
        assert unknown_fields(broken, "Configuration", structs) == [
            "waitForPodsReady.enable",
            "integrations.frameworkz",
        ]


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
