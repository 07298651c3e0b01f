"""Find the newest complete actor checkpoint of a training run (stdlib + google-cloud-storage; in a pod, a file of the
step's ConfigMap beside ``tpu_rl_program.py``, which it imports).

One implementation for every reader: the program verifies a finished run and names its last step,
`make status` and `make report` show it, the export container runs this file (the MaxText image ships
google-cloud-storage) to pick the same step at run time, so the export manifest depends only on the training run's
identity, and the training container runs it to tell whether its attempt resumes (``commands.resume_lines``). It is
a file of both steps' ConfigMaps: a change to it renames training and the export.

Checkpoint layout (tunix ``CheckpointManager`` under MaxText's ``checkpoint_dir``):
``<root><step>/`` with ``model_params/`` and ``optimizer_state/``, each array its own zarr folder
(``.zarray`` plus one object per shard): a 26B run writes tens of thousands of objects per step.
Orbax finalizes a step on GCS by writing ``<step>/commit_success.txt`` (orbax ``_src/path/atomicity.py``,
``CommitFileTemporaryPath.finalize``); a step without it, or a ``<step>.orbax-checkpoint-tmp-*`` folder,
is a save that did not finish.

So nothing lists every object: one listing with ``delimiter="/"`` gives the step folders (a few
pages however many objects there are), then, newest first, each step is checked with one object
lookup (the commit file) and one listing of at most one name (``model_params/`` is not empty).
"""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the operator's readers, the tests)
    from workloads.container.tpu_rl_program import FailedError
else:  # python3 /tpu-rl/checkpoint_scan.py: tpu_rl_program.py is a file of the same ConfigMap, its folder on sys.path
    from tpu_rl_program import FailedError

COMMIT_FILE = "commit_success.txt"
PARAMS_DIR = "model_params/"
TMP_MARK = ".orbax-checkpoint-tmp"
NOTHING_TO_EXPORT = 3
"""Exit code when no complete checkpoint exists (core.names.SETUP_FAILURE_EXIT: never retried)."""
MAX_PAGES = 100
"""Pages of step folders (1,000 each) before the listing is refused as endless."""


class ListingTooLongError(FailedError):
    """A GCS listing that did not end within its bound of pages (``MAX_PAGES``)."""


def split_uri(uri):
    """``gs://bucket/a/b/`` -> (``bucket``, ``a/b/``)."""
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri}")
    bucket, _, prefix = uri[len("gs://") :].partition("/")
    return bucket, prefix


def step_folders(client, bucket, prefix, **call):
    """The folder names directly under ``prefix`` (``50/``, ``60.orbax-checkpoint-tmp-1712/``)."""
    listing = client.list_blobs(bucket, prefix=prefix, delimiter="/", page_size=1000, **call)
    for pages, page in enumerate(listing.pages, 1):
        for _ in page:  # objects directly under the root (none expected)
            pass
        if pages >= MAX_PAGES and listing.next_page_token:
            raise ListingTooLongError(f"more than {MAX_PAGES} pages of step folders under gs://{bucket}/{prefix}")
    return sorted(name[len(prefix) : -1] for name in listing.prefixes)


def parse_step(folder):
    """(step, finished?) of a step folder name, or None for anything else."""
    head, dot, tail = folder.partition(".")
    if not (head.isascii() and head.isdigit() and len(head) <= 12):
        return None
    if not dot:
        return int(head), True
    return (int(head), False) if tail.startswith(TMP_MARK[1:]) else None


def newest_complete_step(client, root, **call):
    """(newest complete step or None, the newer steps found incomplete, descending).

    ``call`` (``timeout``, ``retry``) is passed to every storage call.
    """
    bucket, prefix = split_uri(root)
    found = [parsed for parsed in map(parse_step, step_folders(client, bucket, prefix, **call)) if parsed]
    incomplete = sorted({step for step, finished in found if not finished}, reverse=True)
    for step in sorted({step for step, finished in found if finished}, reverse=True):
        base = f"{prefix}{step}/"
        committed = client.bucket(bucket).blob(base + COMMIT_FILE).exists(**call)
        has_params = committed and any(
            True for _ in client.list_blobs(bucket, prefix=base + PARAMS_DIR, max_results=1, **call)
        )
        if committed and has_params:
            return step, [s for s in incomplete if s > step]
        incomplete = sorted({*incomplete, step}, reverse=True)
    return None, incomplete


def latest_checkpoint(root):
    """Print ``<root><step>/model_params/`` of the newest complete step; exit 3 naming the root if none."""
    from google.cloud import storage  # in the image; honours STORAGE_EMULATOR_HOST

    step, _ = newest_complete_step(storage.Client(), root)
    if step is None:
        print(f"tpu-rl: no complete checkpoint under {root} (nothing to export)", file=sys.stderr)
        return NOTHING_TO_EXPORT
    print(f"{root}{step}/{PARAMS_DIR}")
    return 0


def main(argv):
    if len(argv) == 1 and argv[0].startswith("gs://") and argv[0].endswith("/"):
        return latest_checkpoint(argv[0])
    print("usage: checkpoint_scan gs://BUCKET/.../checkpoints/actor/", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
