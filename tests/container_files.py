"""A container program as its pod runs it, for the tests that run one through a real ``python3``: a file of a folder
that holds what it imports from its ConfigMap (``workloads.specs.commands.program_files``)."""

from __future__ import annotations

from pathlib import Path

from workloads.specs.commands import program_files


def container_program(tmp_path: Path, name: str) -> Path:
    """The program ``name`` written to ``tmp_path/tpu-rl`` with the files it imports, as the kubelet mounts its
    ConfigMap; its path (run it as ``python3 <path>``)."""
    folder = tmp_path / "tpu-rl"
    folder.mkdir(exist_ok=True)
    for file_name, text in program_files(name).items():
        (folder / file_name).write_text(text)
    return folder / name
