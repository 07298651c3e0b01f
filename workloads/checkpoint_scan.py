"""Find the newest complete actor checkpoint of a training run (stdlib + google-cloud-storage).

One algorithm, two runtimes: the program imports ``complete_steps`` to verify a finished run
and name its last step; the export container runs this file's source with ``python3 -c ROOT``
(the MaxText image ships google-cloud-storage) to pick the same step at run time, so the export
manifest depends only on the training run's identity, never on what a preview cannot know.

Checkpoint layout (tunix ``CheckpointManager`` under MaxText's ``checkpoint_dir``):
``<root>/<step>/`` with ``model_params/`` and ``optimizer_state/``. Orbax finalizes a step on GCS
by writing ``commit_success.txt`` into it (orbax ``_src/path/atomicity.py``:
``CommitFileTemporaryPath.finalize`` and ``AtomicRenameTemporaryPath.finalize``); a step without
it, or a ``<step>.orbax-checkpoint-tmp-*`` directory, is a save that did not finish.
"""

import sys
from collections.abc import Iterable

COMMIT_FILE = "commit_success.txt"
PARAMS_DIR = "model_params/"
NOTHING_TO_EXPORT = 3
"""Exit code when no complete checkpoint exists (core.names.SETUP_FAILURE_EXIT: never retried)."""


def complete_steps(names: Iterable[str]) -> list[int]:
    """Steps (ascending) whose directory holds the commit file and a non-empty ``model_params/``.

    ``names`` are object names relative to the checkpoint root (``50/model_params/x``).
    """
    committed: set[int] = set()
    with_params: set[int] = set()
    for name in names:
        step, _, rest = name.partition("/")
        if not (step.isascii() and step.isdigit()):
            continue
        if rest == COMMIT_FILE:
            committed.add(int(step))
        elif rest.startswith(PARAMS_DIR) and len(rest) > len(PARAMS_DIR):
            with_params.add(int(step))
    return sorted(committed & with_params)


def started_steps(names: Iterable[str]) -> list[int]:
    """Every step directory that exists, complete or not (ascending)."""
    steps: set[int] = set()
    for name in names:
        step = name.split("/", 1)[0]
        if step.isascii() and step.isdigit():
            steps.add(int(step))
    return sorted(steps)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri[len("gs://") :].partition("/")
    return bucket, prefix


def latest_checkpoint(root: str) -> int:
    """Print ``<root><step>/model_params/`` of the newest complete step; exit 3 naming the root if none."""
    from google.cloud import storage  # in the image; honours STORAGE_EMULATOR_HOST

    bucket, prefix = _split(root)
    names = [blob.name[len(prefix) :] for blob in storage.Client().list_blobs(bucket, prefix=prefix)]
    steps = complete_steps(names)
    if not steps:
        print(f"tpu-rl: no complete checkpoint under {root} (nothing to export)", file=sys.stderr)
        return NOTHING_TO_EXPORT
    print(f"{root}{steps[-1]}/{PARAMS_DIR}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 1 and argv[0].startswith("gs://") and argv[0].endswith("/"):
        return latest_checkpoint(argv[0])
    print("usage: checkpoint_scan gs://BUCKET/.../checkpoints/actor/", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
