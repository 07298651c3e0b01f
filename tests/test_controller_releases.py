"""The adopted JobSet and Kueue releases as data (``core.controllers``), read by calling ``load`` (the module reads
its file once at import, before any mutant of a mutation run is active): each release's fields, a JobSet's schema
fields as a set, their order kept, and where each release's CRDs and facts are vendored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import controllers

pytestmark = pytest.mark.pure


def test_every_release_is_read_with_its_fields_in_the_files_order(tmp_path: Path) -> None:
    data = {
        "jobset": {
            "0.9.0": {"commit": "c9", "crds": {"jobsets": "schemas/a.yaml"}, "schemaFields": ["spec.x"], "facts": "f9"},
            "0.8.0": {"commit": "c8", "crds": {}, "facts": "f8"},
        },
        "kueue": {"0.17.8": {"commit": "k", "crds": {"localqueues": "schemas/q.yaml"}, "facts": "fk"}},
    }
    path = tmp_path / "controllers.json"
    path.write_text(json.dumps(data))
    read = controllers.load(path)
    assert list(read) == ["jobset", "kueue"]
    assert list(read["jobset"]) == ["0.9.0", "0.8.0"]
    assert read["jobset"]["0.9.0"] == controllers.Release(
        "0.9.0", "c9", {"jobsets": "schemas/a.yaml"}, frozenset({"spec.x"}), "f9"
    )
    assert read["jobset"]["0.8.0"] == controllers.Release("0.8.0", "c8", {}, frozenset(), "f8")
    assert read["kueue"]["0.17.8"].crds == {"localqueues": "schemas/q.yaml"}


def test_the_adopted_releases_are_the_files() -> None:
    assert controllers.load() == controllers.RELEASES
    assert all(r.schema_fields for r in controllers.RELEASES["jobset"].values())


def test_where_a_releases_crds_and_facts_are_vendored() -> None:
    assert controllers.crd_file("kueue", "0.17.8", "localqueues") == (
        "schemas/kueue-v0.17.8/kueue.x-k8s.io_localqueues.yaml"
    )
    assert controllers.facts_file("jobset", "0.11.1") == "schemas/jobset-v0.11.1/facts.json"
