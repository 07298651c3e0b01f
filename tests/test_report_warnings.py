"""`make report` prints no warning: the report of a whole run, made in a fresh interpreter with
every warning an error (``-W error``: a warning raised when a library is imported would not show in this test
process, where the libraries are imported already, and pyproject.toml's pytest filters do not apply there)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from tests.lifecycle_walk import settings
from tests.run_files import upload_run
from tools.notices import hide_python_version_notice
from tools.stack_files import ROOT
from workloads.specs.step_specs import plan_workflow

RUN = plan_workflow(settings("dev", [])).train.output_uri


@pytest.mark.slow
def test_the_report_of_a_run_raises_no_warning(gcs, tmp_path):
    upload_run(gcs, RUN, steps=list(range(1, 11)), checkpoints=(10,))
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "tools.report", "--stack", "dev", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "error", "MPLCONFIGDIR": str(tmp_path / "mpl")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and (out / "report.html").is_file()


@pytest.mark.pure
def test_only_google_api_cores_python_version_notice_is_hidden():
    """The filter is that one warning from that one module: the same text from elsewhere, or another
    FutureWarning from google.api_core, still shows."""
    notice = "You are using a Python version (3.11.7) which Google will stop supporting in new releases"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hide_python_version_notice()
        for module, message in (
            ("google.api_core._python_version_support", notice),
            ("google.api_core._python_version_support", "something else"),
            ("workloads.observe.plots", notice),
        ):
            warnings.warn_explicit(message, FutureWarning, "x.py", 1, module=module)
    assert [(str(w.message)) for w in caught] == ["something else", notice]
