"""Edges of the steps' command lines (``workloads.specs.commands``): the export's whole script, line by line, with
paths that need quoting, and the whole warning a plan of two slices prints. Pure."""

from __future__ import annotations

import shlex

import pytest

from workloads.specs.commands import export_script, slice_warnings, train_config

pytestmark = pytest.mark.pure

ACTOR = "gs://b/m/train/abc/rl/checkpoints/actor/"
OUTPUT = "gs://b/m/export/def/"
CONVERT = "gs://b/m/convert/0123 x/"
"""A path with a space: quoted on every line that names it."""
REPO = "google/gemma-4-26b-a4b-it"
CHECK = "python3 /tpu-rl/maxtext_check.py image:tag"


def test_the_export_script_checks_marks_scans_fetches_exports_and_completes():
    """Each line in order, each path where its program reads it: the output folder marked once its grants on the
    checkpoints and the conversion hold; the base's files at the converted commit fetched into /scratch/base (the
    exporter's --hf_model_path); the completion given the repository, the commit, the output and the conversion."""
    script = export_script(["-m", "exporter", "a b"], ACTOR, OUTPUT, REPO, CONVERT, CHECK)
    assert script.splitlines() == [
        "set -euo pipefail",
        CHECK,
        f"python3 /tpu-rl/mark_folder.py {OUTPUT} {ACTOR} 'gs://b/m/convert/0123 x/'",
        f'checkpoint="$(python3 /tpu-rl/checkpoint_scan.py {ACTOR})"',
        'echo "tpu-rl: exporting ${checkpoint}"',
        "commit=$(python3 /tpu-rl/base_snapshot.py fetch 'gs://b/m/convert/0123 x/' /scratch/base)",
        "python3 -m exporter 'a b'",
        f"exec python3 /tpu-rl/complete_export.py {REPO} \"${{commit}}\" {OUTPUT} 'gs://b/m/convert/0123 x/'",
    ]
    assert script.endswith("'\n") and not script.endswith("\n\n"), "one line feed ends the script"
    fetch = shlex.split(script.splitlines()[5].removeprefix("commit=$(").removesuffix(")"))
    assert fetch[2:] == ["fetch", CONVERT, "/scratch/base"]


def test_a_plan_of_two_slices_prints_the_whole_experimental_warning():
    assert slice_warnings(2) == [
        "tpu-rl:tpu.slices 2 is experimental: MaxText 0.2.5's own code builds its meshes (the trainer's on one slice, "
        "one sampler replica over the other: rollout_data_parallelism 1, maxtext#2702; tests/test_maxtext_meshes.py), "
        "but no training run on two slices has been seen: watch its first run (make status) before relying on it"
    ]
    assert slice_warnings(1) == []


def test_the_overrides_file_is_made_of_train_rls_argv_only():
    with pytest.raises(ValueError, match=r"\Anot train_rl's argv: \['-m', 'exporter'\]\Z"):
        train_config(["-m", "exporter", "a=b"])
