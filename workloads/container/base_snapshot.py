"""One commit of the base model for every step (run in the MaxText image as ``python3 -c`` of this file's text
with ``core/hf_model.py``'s in place of its import, as the export step runs ``complete_export.py``).

    python3 base_snapshot.py snapshot BASE_REPO REVISION CONVERT_URI   # the conversion, first: prints the commit
    python3 base_snapshot.py fetch CONVERT_URI LOCAL_DIR                # training, the export: prints the commit

``tpu-rl:model.revision`` is a branch, a tag or a commit, and a branch moves. The conversion resolves it once,
here, before ``to_maxtext`` reads the weights at that commit (its ``--revision``): the base's files that are not
weights (``config.json``, the tokenizer's, the chat template, the generation and processor configs) are copied,
at that commit, to ``<conversion output>base/``, and ``<conversion output>source.json`` records
``{"repo", "revision", "commit", "files"}``, written last. Training (``tokenizer_path``, which vLLM reads too) and
the export (``to_huggingface``'s ``--hf_model_path``, and the base the export is completed from) read those files
and that commit, never the branch again; the program's export check and the model card read the record.

A conversion run again (a retry) keeps the commit it recorded: the branch may have moved since, and the
checkpoint it resumes is of that commit. Exit 0 with the commit on stdout; 3 for a refusal (a record of another
repository, a commit the Hub does not name, no ``config.json``); 1 when the Hub or GCS fails (the step runs
again).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

# tpu-rl: core/hf_model.py is inlined here (workloads/specs/commands.py)
from core.hf_model import CONFIG_FILE, name_problem

# tpu-rl: end of core/hf_model.py

REFUSED = 3
COMMIT = re.compile(r"[0-9a-f]{40}")
RECORD = "source.json"
BASE_FOLDER = "base/"
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".tflite")
"""What is not copied: the weights (``to_maxtext`` reads them itself, at the commit)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest file copied (Gemma's ``tokenizer.json`` is about 32 MB)."""
MAX_FILES = 100
TIMEOUT = 60.0


class RefusedError(Exception):
    """The same input fails the same way (exit 3)."""


class FailedError(Exception):
    """The Hub or GCS failed (exit 1: the step runs again)."""


def log(message: str) -> None:
    print(f"tpu-rl base: {message}", file=sys.stderr, flush=True)


def folder(uri: str) -> tuple[Any, str]:
    """The GCS bucket and prefix of a ``gs://`` folder."""
    from google.cloud import storage

    if not uri.startswith("gs://") or not uri.endswith("/"):
        raise RefusedError(f"{uri} is not a gs:// folder")
    bucket_name, _, prefix = uri[len("gs://") :].partition("/")
    return storage.Client().bucket(bucket_name), prefix


def read_record(bucket: Any, prefix: str, uri: str) -> dict[str, Any] | None:
    """The conversion's record, None when there is none yet."""
    blob = bucket.blob(prefix + RECORD)
    if not blob.exists(timeout=TIMEOUT):
        return None
    data = blob.download_as_bytes(start=0, end=MAX_FILE_BYTES - 1, timeout=TIMEOUT)
    try:
        record = json.loads(data)
    except ValueError:
        raise RefusedError(f"{uri}{RECORD} is not JSON") from None
    files = record.get("files") if isinstance(record, dict) else None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("repo"), str)
        and isinstance(record.get("commit"), str)
        and COMMIT.fullmatch(record["commit"])
        and isinstance(files, list)
        and all(isinstance(f, str) and name_problem(f) is None for f in files)
    ):
        raise RefusedError(f"{uri}{RECORD} is not a record of this step (repo, commit, files)")
    return record


def _first(err: Exception) -> str:
    """An error's first line, bounded (the Hub's errors run to several lines)."""
    return (str(err).splitlines() or [""])[0][:300]


def wanted(name: str, size: int) -> bool:
    """A file of the base worth copying: a plain file name of the repository's top folder, not weights, small."""
    return name_problem(name) is None and not name.endswith(WEIGHTS) and size <= MAX_FILE_BYTES


def snapshot(repo: str, revision: str, uri: str) -> str:
    """Resolve ``revision`` (or keep the recorded commit), copy the base's files to ``<uri>base/``, record."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    bucket, prefix = folder(uri)
    record = read_record(bucket, prefix, uri)
    if record is not None and record["repo"] != repo:
        raise RefusedError(f"{uri}{RECORD} records {record['repo']}, not {repo}")
    commit = record["commit"] if record else revision
    try:
        info = HfApi(library_name="tpu-rl").model_info(repo, revision=commit, files_metadata=True, timeout=TIMEOUT)
    except (RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError) as err:  # a retry reads the same
        raise RefusedError(f"cannot read {repo}@{commit} from the Hub ({type(err).__name__}: {_first(err)})") from None
    except Exception as err:  # noqa: BLE001 (one line: the Hub's error class and its words)
        raise FailedError(f"cannot read {repo}@{commit} from the Hub ({type(err).__name__}: {_first(err)})") from None
    if not isinstance(info.sha, str) or not COMMIT.fullmatch(info.sha):
        raise RefusedError(f"the Hub named no commit for {repo}@{commit}")
    if record is not None and info.sha != record["commit"]:
        raise RefusedError(f"the Hub answered {repo}@{commit} with another commit, {info.sha}")
    commit = info.sha
    names = sorted(s.rfilename for s in info.siblings or [] if wanted(s.rfilename, int(s.size or 0)))[:MAX_FILES]
    if CONFIG_FILE not in names:
        raise RefusedError(f"{repo}@{commit} has no {CONFIG_FILE}")
    with tempfile.TemporaryDirectory(prefix="tpu-rl-base-") as work:
        for name in names:
            try:
                path = hf_hub_download(repo, name, revision=commit, local_dir=work, etag_timeout=TIMEOUT)
            except Exception as err:  # noqa: BLE001
                raise FailedError(f"cannot download {name} of {repo}@{commit} ({type(err).__name__})") from None
            bucket.blob(prefix + BASE_FOLDER + name).upload_from_filename(path, timeout=TIMEOUT * 5)
            log(f"copied {name} of {repo}@{commit[:12]} to {uri}{BASE_FOLDER}{name}")
    body = {"repo": repo, "revision": revision, "commit": commit, "files": names}
    bucket.blob(prefix + RECORD).upload_from_string(
        json.dumps(body, sort_keys=True), content_type="application/json", timeout=TIMEOUT
    )
    log(f"{repo}@{revision} is commit {commit}: recorded in {uri}{RECORD}")
    return commit


def fetch(uri: str, local: str) -> str:
    """The recorded base files into ``local`` (a step's own disk); the recorded commit."""
    bucket, prefix = folder(uri)
    record = read_record(bucket, prefix, uri)
    if record is None:
        raise RefusedError(f"{uri}{RECORD} is missing: the conversion did not finish")
    target = Path(local)
    target.mkdir(parents=True, exist_ok=True)
    for name in record["files"]:
        blob = bucket.blob(prefix + BASE_FOLDER + name)
        blob.reload(timeout=TIMEOUT)
        if int(blob.size or 0) > MAX_FILE_BYTES:
            raise RefusedError(f"{uri}{BASE_FOLDER}{name} is larger than a base model's {name}")
        path = (target / name).resolve()
        if path.parent != target.resolve():  # the record's names are plain file names (read_record)
            raise RefusedError(f"{name} is not a file of {local}")
        blob.download_to_filename(str(path), timeout=TIMEOUT * 5)
    log(f"{len(record['files'])} files of {record['repo']}@{record['commit'][:12]} in {local}")
    return str(record["commit"])


def main(argv: list[str]) -> None:
    try:
        if argv[:1] == ["snapshot"] and len(argv) == 4:
            commit = snapshot(*argv[1:])
        elif argv[:1] == ["fetch"] and len(argv) == 3:
            commit = fetch(*argv[1:])
        else:
            raise RefusedError("usage: base_snapshot.py snapshot REPO REVISION CONVERT_URI | fetch CONVERT_URI DIR")
    except RefusedError as err:
        log(str(err))
        sys.exit(REFUSED)
    except FailedError as err:
        log(str(err))
        sys.exit(1)
    except Exception as err:  # noqa: BLE001 (GCS and anything else: one line, the step runs again)
        log(f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
        sys.exit(1)
    print(commit, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
