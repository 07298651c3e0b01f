"""The publish step's program, run in the MaxText image as a file of its ConfigMap (with ``hf_model.py``,
``core/hf_model.py``, ``shown.py``, ``tpu_rl_program.py`` and ``tpu_rl_download.py`` beside it): the verified export,
from GCS to a branch of a Hub model repository.

    python3 publish_hub.py EXPORT_URI CARD_DIR WORK_DIR RECORD_URI

What and where come from the container's environment, set by the step's manifest (so the policy pack reads
what runs): ``TPU_RL_PUBLISH_REPO`` (``namespace/name``), ``TPU_RL_PUBLISH_BRANCH`` (``tpu-rl-<step hash>``)
and ``TPU_RL_PUBLISH_PRIVATE`` (``true``/``false``); the write token is ``HF_TOKEN``, from its Secret by
``secretKeyRef``, read by ``huggingface_hub`` itself and never printed.

1. Every object of the exported folder is downloaded to ``WORK_DIR/model`` (the pod's own scratch disk), then
   the card folder's files (``README.md``, the reward curve) are copied in. Each object must be a file of a
   model folder, one plain name whose path resolves inside the folder (``core.hf_model.export_file_problem``;
   another stops the step, exit 3), and holds at most its listed size.
2. ``create_repo(private=..., exist_ok=True)``; an existing repository keeps its visibility
   (``create_repo`` ignores ``private`` then), so a private run refuses a public repository.
3. ``create_branch(exist_ok=True)`` (``upload_folder`` does not create its revision; it starts at ``main``),
   then ``upload_folder`` to the branch, deleting what else the branch holds (``delete_patterns="*"``): one
   call, re-run as is to resume. Files the branch already holds with the same content are not committed
   again (the client compares each file's hash with the Hub's; Xet skips chunks it stored), and a call that
   changes nothing makes no commit.
4. ``RECORD_URI`` gets ``{"repo", "branch", "commit", "private"}``: what was published.

Exit 0 when published; 3 for a refusal (a public repository for a private run, an export folder with nothing
in it: running it again fails the same way until that is fixed; the preflight refuses the first before
anything is created); 1 for anything else (the Hub or GCS failing). Either fails the step, which the next
`make up` runs again; an upload resumes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core import hf_model
    from workloads.container import shown
    from workloads.container.tpu_rl_download import CappedFile
    from workloads.container.tpu_rl_program import FAILED, REFUSED
else:  # python3 /tpu-rl/publish_hub.py: hf_model.py (core's) and its other imports are files of its ConfigMap
    import hf_model
    import shown
    from tpu_rl_download import CappedFile
    from tpu_rl_program import FAILED, REFUSED


def fail(message: str, code: int = FAILED) -> None:
    print(f"tpu-rl publish: {shown.line(message)}", file=sys.stderr, flush=True)
    sys.exit(code)


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, refused unless ``name`` is a file of a model folder and the path resolves inside it."""
    problem = hf_model.export_file_problem(name)
    target = (folder / name).resolve()
    if problem or target.parent != folder.resolve():
        fail(f"the export holds an object that is not a file of a model folder: {problem or name}", REFUSED)
    return target


def download(export_uri: str, folder: Path) -> list[str]:
    """The exported folder's objects, each a file of a model folder (``core.hf_model.export_file_problem``),
    into ``folder``; their names."""
    from google.cloud import storage

    bucket_name, _, prefix = export_uri[len("gs://") :].partition("/")
    client = storage.Client()
    names = []
    for blob in client.list_blobs(bucket_name, prefix=prefix):
        name = blob.name[len(prefix) :]
        if not name:
            continue  # the folder's own marker
        size = int(blob.size or 0)
        target = inside(folder, name)
        sink = CappedFile(target, size, hf_model.ReplyTooLargeError, f"{export_uri}{name}")
        try:
            blob.download_to_file(sink)
        finally:
            sink.close()
        if sink.written != size:
            raise hf_model.ReplyTooLargeError(f"{export_uri}{name}: GCS sent {sink.written} of its {size} listed bytes")
        print(f"tpu-rl publish: downloaded {shown.line(name)} ({size} bytes)", flush=True)
        names.append(name)
    return names


def inside_card(folder: Path, name: str) -> Path:
    """Where a card file (the ConfigMap's, named by the program) goes: a plain name, inside ``folder``."""
    target = (folder / name).resolve()
    if "/" in name or "\\" in name or target.parent != folder.resolve():
        fail(f"the card holds {name!r}, which is not a plain file name", REFUSED)
    return target


def publish(repo: str, branch: str, private: bool, folder: Path, message: str) -> str:
    """Upload ``folder`` to ``repo``'s ``branch``; the branch's commit."""
    from huggingface_hub import HfApi

    api = HfApi(library_name="tpu-rl")
    api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
    if private and not api.model_info(repo).private:
        fail(
            f"{repo} exists and is public; this run is private (tpu-rl:publish.private), so nothing was uploaded: "
            "make the repository private or set tpu-rl:publish.private false",
            REFUSED,
        )
    api.create_branch(repo, branch=branch, repo_type="model", exist_ok=True)
    info = api.upload_folder(
        repo_id=repo,
        folder_path=str(folder),
        repo_type="model",
        revision=branch,
        commit_message=message,
        ignore_patterns=[".cache/**", "*/.cache/*"],  # the client refuses .cache at any depth
        # The branch holds this run only: what it inherited from main (an earlier model's shards, another
        # tokenizer) is deleted in the same commit (.gitattributes is kept: huggingface_hub never deletes it).
        delete_patterns="*",
    )
    return str(info.oid)


def write_record(record_uri: str, record: dict[str, object]) -> None:
    from google.cloud import storage

    bucket_name, _, name = record_uri[len("gs://") :].partition("/")
    blob = storage.Client().bucket(bucket_name).blob(name)
    blob.upload_from_string(json.dumps(record, sort_keys=True), content_type="application/json")


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        fail("usage: publish_hub.py EXPORT_URI CARD_DIR WORK_DIR RECORD_URI", REFUSED)
    export_uri, card_dir, work_dir, record_uri = argv
    repo = os.environ.get("TPU_RL_PUBLISH_REPO", "")
    branch = os.environ.get("TPU_RL_PUBLISH_BRANCH", "")
    private = os.environ.get("TPU_RL_PUBLISH_PRIVATE", "")
    if not repo or not branch or private not in ("true", "false"):
        fail("TPU_RL_PUBLISH_REPO, TPU_RL_PUBLISH_BRANCH and TPU_RL_PUBLISH_PRIVATE must be set", REFUSED)
    if not os.environ.get("HF_TOKEN"):
        fail("HF_TOKEN is empty: the write token's Secret has no value", REFUSED)
    folder = Path(work_dir) / "model"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        names = download(export_uri, folder)
    except Exception as err:  # noqa: BLE001 (one line; the step fails and the next `up` runs it again)
        fail(f"cannot download {export_uri} ({type(err).__name__}: {err})")
    if not names:
        fail(f"{export_uri} holds no files", REFUSED)
    card = Path(card_dir)
    for path in sorted(card.iterdir()) if card.is_dir() else []:
        if path.is_file() and not path.name.startswith("."):
            shutil.copyfile(path, inside_card(folder, path.name))
            print(f"tpu-rl publish: added {shown.line(path.name)}", flush=True)
    try:
        commit = publish(repo, branch, private == "true", folder, f"tpu-rl: {branch}")
    except Exception as err:  # noqa: BLE001 (a refusal exits through fail(): SystemExit is not an Exception)
        fail(f"uploading to {repo}@{branch} failed ({type(err).__name__}: {err})")
    record = {"repo": repo, "branch": branch, "commit": commit, "private": private == "true"}
    try:
        write_record(record_uri, record)
    except Exception as err:  # noqa: BLE001
        fail(f"published {repo}@{branch} ({commit}) but cannot write {record_uri} ({type(err).__name__})")
    print(f"tpu-rl publish: {repo}@{branch} is commit {commit}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
