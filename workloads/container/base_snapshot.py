"""One commit of the base model for every step, fetched from the Hub once (run in the MaxText image as
``python3 /tpu-rl/base_snapshot.py``, a file of the step's ConfigMap beside the files it imports, ``hf_model.py``
(``core/hf_model.py``), ``shown.py`` and ``tpu_rl_program.py``); and what ``stage_dataset.py`` (training's dataset)
shares with it: the Hub's description of a commit, a cached object read at one generation and hashed, the dataset
files a pattern selects (the preflight's too), the tries.

    python3 base_snapshot.py snapshot BASE_REPO REVISION CONVERT_URI CACHE_URI LOCAL_DIR SHARED_URI  # the conversion
    python3 base_snapshot.py fetch CONVERT_URI LOCAL_DIR                                   # training, the export

``tpu-rl:model.revision`` is a branch, a tag or a commit, and a branch moves. The conversion resolves it once, here,
and takes every file of that commit it needs through the **Hub cache**: an entry ``<root><repo>/<commit>/`` per model
and commit, its files and ``entry.json``, the Hub's description of each (``ENTRY``). ``CACHE_URI`` is the root it
writes (the stack's own, or a shared one whose writer the stack is), ``SHARED_URI`` one it reads first and never
writes (``CACHE_URI`` again without one). Each file comes from the first entry holding it as the Hub names it (read at
one generation, hashed), else from the Hub (hashed) into ``CACHE_URI``'s entry; a copy of another hash is one line and
never used (``cached``). The Hub's description is asked for every time (one API call, no file) and kept in the entry
it writes and in the stack's **own record** (``own_root``: the stack's own cache, beside ``CONVERT_URI``, which only
the stack's conversion writes). Out of the Hub's reach, for a commit, that own record alone stands in for the Hub
(``recorded``): a shared entry's ``entry.json`` may have been rewritten by any writer of its folder, and a file
recorded by its size alone proves nothing. So the weights cross the Hub once per (model, commit), and no stack can
plant a file in another's conversion.

The files land in ``LOCAL_DIR``, where ``to_maxtext`` reads the weights (``--hf_model_path``: MaxText's
``LazyHFLoader``, 0.2.4's and 0.2.5's, reads a local folder and asks the Hub nothing); the base's files that are not
weights (the configs, the tokenizer's, the chat template) are copied to ``<conversion output>base/``, and
``<conversion output>source.json`` records ``{"repo", "revision", "commit", "files", "verified"}`` (``VERIFIED``),
written last. Training (``tokenizer_path``, which vLLM reads too) and the export (``to_huggingface``'s
``--hf_model_path``, and the base the export is completed from) read those files and that commit, never the branch
again; the program's export check and the model card read the record.

A conversion run again (a retry) keeps the commit it recorded: the branch may have moved since, and the checkpoint
it resumes is of that commit. Exit 0 with the commit on stdout; 3 for a refusal (a record of another repository, a
commit the Hub does not name, no ``config.json``); 1 when the Hub or GCS still fails after three tries, 30 s and 90 s
apart (``RETRY_WAITS``: the step fails, and the next `up` retries it).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core import hf_model
    from workloads.container import shown
    from workloads.container.tpu_rl_program import REFUSED, FailedError, RefusedError
else:  # python3 /tpu-rl/base_snapshot.py: hf_model.py (core's) and its other imports are files of its ConfigMap
    import hf_model
    import shown
    from tpu_rl_program import REFUSED, FailedError, RefusedError

COMMIT = re.compile(r"[0-9a-f]{40}")
RECORD = "source.json"
BASE_FOLDER = "base/"
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".tflite")
"""What is not copied to the conversion's ``base/``: the weights (``to_maxtext`` reads them from ``LOCAL_DIR``)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest file copied to ``base/`` (Gemma's ``tokenizer.json`` is about 32 MB)."""
MAX_WEIGHTS_BYTES = 64 * 1024**3
"""The largest weights file fetched (a 26B model's safetensors shards are a few GB each)."""
INDEX = "model.safetensors.index.json"
ENTRY = "entry.json"
"""A cache entry's record: the commit's files as the Hub describes them, ``{"repo", "commit", "files": {name: {"size",
"sha256" | "blobId"}}}`` (``core.hf_model.HubFile``; a dataset's adds ``"patterns"``, ``stage_dataset.py``), written
by the entry's writer once it holds what it fetched; each object of the entry is hashed and compared with the Hub's
value (or, the Hub out of reach, the stack's own record's) before it is used."""
OWN_CACHE = "hub/"
"""The stack's own Hub cache beside the conversion's outputs (``core.layout.hub_cache``: ``<model>/convert/hub/``)."""
VERIFIED = "verified"
"""The conversion's record (``RECORD``) of the cache object it took each file from, hashed:
``{name: {"object": "gs://...", "generation": N, "size", "sha256" | "blobId"}}``. The export reads the base's
tensors from exactly those objects at those generations (``complete_export.py``), never the Hub."""
AGAIN = "delete {uri} and run `make up STACK=<stack>` again"
"""The fix for a damaged cache entry: the step's retry fills it again."""
MAX_FILES = 100
TIMEOUT = 60.0


def log(message: str) -> None:
    """One line of the step's log; the Hub's and GCS's errors and a record's names come in it (``shown.line``)."""
    print(f"tpu-rl base: {shown.line(message, None)}", file=sys.stderr, flush=True)


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
        record = hf_model.json_document(data, f"{uri}{RECORD}")
    except hf_model.JsonDocumentError as err:
        raise RefusedError(str(err)) from None
    files = record.get("files") if isinstance(record, dict) else None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("repo"), str)
        and isinstance(record.get("commit"), str)
        and COMMIT.fullmatch(record["commit"])
        and isinstance(files, list)
        and all(isinstance(f, str) and hf_model.name_problem(f) is None for f in files)
    ):
        raise RefusedError(f"{uri}{RECORD} is not a record of this step (repo, commit, files)")
    return record


def _first(err: Exception) -> str:
    """An error's first line, bounded (the Hub's errors run to several lines)."""
    return (str(err).splitlines() or [""])[0][:300]


def wanted(name: str, size: int) -> bool:
    """A file of the base worth copying to ``base/``: a plain name of the repository's top folder, small, no weights."""
    return hf_model.name_problem(name) is None and not name.endswith(WEIGHTS) and size <= MAX_FILE_BYTES


def needed(name: str, size: int) -> bool:
    """A file the conversion needs: one copied to ``base/`` (``wanted``), or the safetensors weights and their index
    ``to_maxtext`` reads from ``LOCAL_DIR``."""
    weights = name.endswith(".safetensors") or name == INDEX
    return wanted(name, size) or (hf_model.name_problem(name) is None and weights and size <= MAX_WEIGHTS_BYTES)


def entry_json(bucket: Any, prefix: str) -> Any:
    """A cache entry's ``entry.json`` parsed (``hf_model.JsonDocumentError``: not JSON within the limits), None when
    there is none (yet)."""
    blob = bucket.blob(prefix + ENTRY)
    if not blob.exists(timeout=TIMEOUT):
        return None
    return hf_model.json_document(blob.download_as_bytes(start=0, end=MAX_FILE_BYTES - 1, timeout=TIMEOUT), ENTRY)


def entry_uri(cache_root: str, repo: str, commit: str) -> str:
    """The cache entry of one commit of one repository: ``<cache_root><repo>/<commit>/``."""
    return f"{cache_root}{repo}/{commit}/"


@dataclass(frozen=True)
class Entry:
    """One Hub cache entry of the base at one commit: where it is, and what its ``entry.json`` records of each file
    (None for a name with a size only: an entry of an earlier version, whose size proves nothing; ``files`` None: no
    ``entry.json``, or one that is not this entry's). The conversion writes the last of its ``entries`` only."""

    uri: str
    bucket: Any
    prefix: str
    files: dict[str, hf_model.HubFile | None] | None


def read_model_entry(
    bucket: Any, prefix: str, uri: str, ids: tuple[str, str]
) -> dict[str, hf_model.HubFile | None] | None:
    """The files an entry's ``entry.json`` records, None when there is none; one that is not the entry of ``ids``
    (repo, commit) is one line and not used (its writer's next conversion writes it again)."""
    try:
        entry = entry_json(bucket, prefix)
    except hf_model.JsonDocumentError:
        entry = {}
    if entry is None:
        return None
    files = entry.get("files") if isinstance(entry, dict) else None
    if isinstance(entry, dict) and (entry.get("repo"), entry.get("commit")) == ids and isinstance(files, dict):
        found = {name: hf_model.recorded_file(value) for name, value in files.items()}
        sizes = all(type(v) is int and v >= 0 for n, v in files.items() if found[n] is None)
        if sizes and all(isinstance(n, str) and hf_model.name_problem(n) is None for n in files):
            return found
    log(f"{uri}{ENTRY} is not the cache entry of {ids[0]}@{ids[1]}: not used")
    return None


def open_entry(cache_root: str, repo: str, commit: str) -> Entry:
    uri = entry_uri(cache_root, repo, commit)
    bucket, prefix = folder(uri)
    return Entry(uri, bucket, prefix, read_model_entry(bucket, prefix, uri, (repo, commit)))


def own_root(uri: str) -> str:
    """The stack's own Hub cache, where the conversion keeps its record of the Hub's hashes: ``hub/`` beside its output
    ``uri`` (``<bucket>/<model>/convert/<id>/`` -> ``<bucket>/<model>/convert/hub/``, ``core.layout.hub_cache``), in
    the stack's bucket, under the prefix only the stack's conversion writes (``infra.gcp.access``). A shared cache's
    folder is written by its writer stack's conversion and may be by anyone who administers its bucket, every sharing
    stack's deploy account included."""
    return uri[: uri.rstrip("/").rfind("/") + 1] + OWN_CACHE


def hub_info(repo: str, ref: str, dataset: bool = False) -> Any:
    """The Hub's info of the model (or ``dataset``) ``repo`` at ``ref``, each file's metadata included: refused for what
    a retry reads the same (no such repository or revision, a gated one), failed (tried again) otherwise."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    api, what = HfApi(library_name="tpu-rl"), f"dataset {repo}@{ref}" if dataset else f"{repo}@{ref} from the Hub"
    read = api.dataset_info if dataset else api.model_info
    try:
        info = read(repo, revision=ref, files_metadata=True, timeout=TIMEOUT)
    except (RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError) as err:  # a retry reads the same
        raise RefusedError(f"cannot read {what} ({type(err).__name__}: {_first(err)})") from None
    except Exception as err:  # noqa: BLE001 (one line: the Hub's error class and its words)
        raise FailedError(f"cannot read {what} ({type(err).__name__}: {_first(err)})") from None
    if not isinstance(info.sha, str) or not COMMIT.fullmatch(info.sha):
        raise RefusedError(f"the Hub named no commit for {'dataset ' if dataset else ''}{repo}@{ref}")
    return info


def sibling_file(sibling: Any, where: str) -> hf_model.HubFile:
    """A file of the Hub's info (``RepoSibling``) as the Hub names its content (``core.hf_model.HubFile``: its size and
    LFS sha256, else its Git blob id); refused when the Hub names neither."""
    lfs = sibling.lfs if isinstance(sibling.lfs, dict) else {}  # BlobLfsInfo is a dict
    found = hf_model.hub_file(sibling.size, lfs.get("sha256"), sibling.blob_id)
    if found is None:
        raise RefusedError(f"the Hub names no sha256 or blob id for {sibling.rfilename} of {where}")
    return found


def hub_files(repo: str, ref: str) -> tuple[str, dict[str, hf_model.HubFile]]:
    """The commit ``ref`` names on the Hub and the files of it the conversion needs, each with its size and the hash
    the Hub names its content by (``sibling_file``)."""
    info = hub_info(repo, ref)
    files = {
        sibling.rfilename: sibling_file(sibling, f"{repo}@{info.sha}")
        for sibling in sorted(info.siblings or [], key=lambda s: str(s.rfilename))
        if needed(sibling.rfilename, int(sibling.size or 0))
    }
    if len(files) > MAX_FILES:
        raise RefusedError(f"{repo}@{info.sha} has {len(files)} files to fetch, more than a base model's {MAX_FILES}")
    return info.sha, files


def recorded(own: Entry, why: str, where: str) -> dict[str, hf_model.HubFile]:
    """With the Hub out of reach (``why``): each file as the stack's own record (``own_root``) names the Hub's hash of
    it. No other record stands in for the Hub: a shared entry's ``entry.json`` may have been rewritten by any writer of
    its folder. Tried again (the Hub may come back) when the own record names no file, or names one by its size alone:
    a cached file is taken on the Hub's hash, never its size."""
    if not own.files:
        raise FailedError(
            f"{why}, and {own.uri}{ENTRY}, the stack's own record of the Hub's hashes, names no file of {where}: "
            "offline, no other record is trusted (any writer of a shared cache's folder can rewrite its entry.json); "
            "the next `make up` runs the conversion again once the Hub answers"
        )
    for name, found in sorted(own.files.items()):
        if found is None:
            raise FailedError(
                f"{why}, and {own.uri}{ENTRY} records {name} of {where} by its size alone, not the Hub's hash"
            )
    log(f"{why}: each cached file is checked against the hash {own.uri}{ENTRY} records")
    return {name: found for name, found in own.files.items() if found is not None}


def held_copy(  # noqa: PLR0913 (the object, what it must be, what its entry claims, where its bytes go)
    bucket: Any,
    name: str,
    expected: hf_model.HubFile,
    what: str,
    whose: str,
    claim: hf_model.HubFile | None = None,
    path: Path | None = None,
) -> tuple[int | None, str | None]:
    """The generation of the object ``name`` (``what``) read whole at one generation (into ``path``, else only hashed
    in 1 MiB chunks) and found to be the file ``expected`` names; else None and why not (None: no such object). A copy
    its entry records as another file (``claim``), or of another size, is not even read; one of another hash is never
    used (``path`` removed)."""
    from google.api_core.exceptions import NotFound

    blob = bucket.get_blob(name, timeout=TIMEOUT)
    if blob is None:
        return None, None
    if claim is not None and claim != expected:
        return None, f"{what}: {ENTRY} records {claim.shown()}, not {whose} {expected.shown()}"
    if blob.size != expected.size:
        return None, f"{what} is {blob.size} bytes, not {whose} {expected.size}"
    generation, digest = int(blob.generation), hf_model.Digest(expected)
    at = bucket.blob(name, generation=generation)
    try:  # the generation looked at is gone: not used
        if path is None:
            at.download_to_file(digest, timeout=TIMEOUT * 60)
        else:
            at.download_to_filename(str(path), timeout=TIMEOUT * 60)
    except NotFound:
        return None, f"{what} was replaced while it was read"
    problem = digest.problem(what, whose) if path is None else hf_model.file_problem(path, expected, what, whose)
    if problem is not None and path is not None:
        path.unlink()
    return (None, problem) if problem is not None else (generation, None)


def from_hub(repo: str, name: str, commit: str, expected: hf_model.HubFile, local: Path, dataset: bool = False) -> Path:
    """``name`` of ``repo`` (a model's, or a ``dataset``'s) at ``commit`` from the Hub into the folder ``local``,
    hashed; failed (tried again, nothing kept) when it cannot be fetched or is not the file ``expected`` names."""
    from huggingface_hub import hf_hub_download

    where = f"{'dataset ' if dataset else ''}{repo}@{commit}"
    try:
        got = Path(
            hf_hub_download(
                repo,
                name,
                repo_type="dataset" if dataset else None,
                revision=commit,
                local_dir=str(local),
                etag_timeout=TIMEOUT,
            )
        )
    except Exception as err:  # noqa: BLE001 (one line: the Hub's error class and its words)
        raise FailedError(f"cannot download {name} of {where} ({type(err).__name__}: {_first(err)})") from None
    problem = hf_model.file_problem(got, expected, f"{name} of {where} as the Hub sent it")
    if problem is not None:
        got.unlink()
        raise FailedError(problem)
    return got


def cached(
    name: str, expected: hf_model.HubFile, entries: list[Entry], local: Path, where: str, online: bool
) -> dict[str, Any]:
    """``name`` into ``local``: from the first entry that holds it as ``expected`` names it (``held_copy``), else from
    the Hub (hashed) into the writable entry. A copy of another hash is one line and never used. The object used, at
    its generation (``VERIFIED``)."""
    whose, why = "the Hub's" if online else "the recorded", f"no Hub cache entry holds {name}"
    for entry in entries:
        what, claim = f"{entry.uri}{name}", (entry.files or {}).get(name)
        generation, problem = held_copy(entry.bucket, entry.prefix + name, expected, what, whose, claim, local / name)
        if generation is not None:
            log(f"{name} of {where} from {entry.uri}, its {expected.kind} checked")
            return {"object": what, "generation": generation, **expected.as_json()}
        if problem is not None:
            why = problem
            log(f"{why}: not used")
    if not online:
        raise FailedError(f"{why}, and the Hub is out of reach to send it again")
    repo, _, commit = where.partition("@")
    got = from_hub(repo, name, commit, expected, local)
    writable = entries[-1]
    blob = writable.bucket.blob(writable.prefix + name)
    blob.upload_from_filename(str(got), timeout=TIMEOUT * 60)
    log(f"{name} of {where} from the Hub, its {expected.kind} checked, kept in {writable.uri}")
    return {"object": writable.uri + name, "generation": int(blob.generation), **expected.as_json()}


def keep_description(entries: list[Entry], repo: str, commit: str, hub: dict[str, hf_model.HubFile]) -> None:
    """The Hub's own description of the commit, kept for a later conversion in each of ``entries`` whose
    ``entry.json`` does not record it yet: the entry the conversion writes, and the stack's own record."""
    body = {"repo": repo, "commit": commit, "files": {name: found.as_json() for name, found in hub.items()}}
    for entry in entries:
        if entry.files != hub:
            entry.bucket.blob(entry.prefix + ENTRY).upload_from_string(
                json.dumps(body, sort_keys=True), content_type="application/json", timeout=TIMEOUT
            )


def snapshot(repo: str, revision: str, uri: str, cache_root: str, local_dir: str, shared_root: str) -> str:
    """Resolve ``revision`` (or keep the recorded commit), fetch the commit's files into ``local_dir`` through the
    Hub cache (``shared_root``'s entry read first, read-only unless it is ``cache_root``, the one this conversion
    writes), each checked against the Hub's hash of it (out of the Hub's reach, the stack's own record's), copy the
    base's files to ``<uri>base/``, record."""
    bucket, prefix = folder(uri)
    _ = folder(cache_root), folder(shared_root)  # gs:// folders, refused before anything is read
    record = read_record(bucket, prefix, uri)
    if record is not None and record["repo"] != repo:
        raise RefusedError(f"{uri}{RECORD} records {record['repo']}, not {repo}")
    commit = record["commit"] if record else revision
    try:
        commit, hub, why = *hub_files(repo, commit), ""
    except FailedError as err:
        if not COMMIT.fullmatch(commit):
            raise
        hub, why = None, str(err)  # a commit: the stack's own record may stand in for the Hub
    if record is not None and commit != record["commit"]:
        raise RefusedError(f"the Hub answered {repo}@{record['commit']} with another commit, {commit}")
    shared = [open_entry(shared_root, repo, commit)] if shared_root != cache_root else []
    entries = [*shared, open_entry(cache_root, repo, commit)]  # the last: the one this conversion writes
    own = entries[-1] if cache_root == own_root(uri) else open_entry(own_root(uri), repo, commit)
    files = hub if hub is not None else recorded(own, why, f"{repo}@{commit}")
    names = sorted(name for name, found in files.items() if wanted(name, found.size))
    if hf_model.CONFIG_FILE not in names:
        raise RefusedError(f"{repo}@{commit} has no {hf_model.CONFIG_FILE}")
    local = Path(local_dir)
    local.mkdir(parents=True, exist_ok=True)
    verified = {n: cached(n, f, entries, local, f"{repo}@{commit}", hub is not None) for n, f in files.items()}
    if hub is not None:
        keep_description([entries[-1], *([own] if own is not entries[-1] else [])], repo, commit, hub)
    for name in names:
        bucket.blob(prefix + BASE_FOLDER + name).upload_from_filename(str(local / name), timeout=TIMEOUT * 5)
    log(f"copied {len(names)} files of {repo}@{commit[:12]} to {uri}{BASE_FOLDER}")
    revision = record["revision"] if record else revision
    body = {"repo": repo, "revision": revision, "commit": commit, "files": names, VERIFIED: verified}
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


MAX_DATASET_FILE_BYTES = 16 * 1024**3
DATASET_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=-]{0,200}(/[A-Za-z0-9][A-Za-z0-9_.=-]{0,200}){0,4}")
"""A dataset file's path in its repository (``data/train_1M-00000-of-00003.parquet``): plain names, a few deep."""


def dataset_path_problem(name: str) -> str | None:
    """Why ``name`` is no dataset file a staged folder may hold, None when it is one."""
    if not DATASET_FILE.fullmatch(name) or any(part in (".", "..") for part in name.split("/")):
        return f"{name[:100]!r} is not a plain path of a dataset's files"
    return None


def matching(names: dict[str, int], pattern: str) -> dict[str, int]:
    """The files of ``names`` a dataset pattern matches (``fnmatch``, paths in the repository)."""
    import fnmatch

    return {n: s for n, s in names.items() if fnmatch.fnmatchcase(n, pattern) and dataset_path_problem(n) is None}


def selected(names: dict[str, int], patterns: Iterable[str], where: str) -> dict[str, int]:
    """The files of ``names`` (name -> size) the patterns match (``matching``): what training stages of the dataset
    ``where`` (``stage_dataset.py``), and what `up`'s preflight checks (``workloads.preflight.check_dataset_access``).
    Refused when a pattern matches nothing, or the match is more than ``MAX_FILES`` files or holds a huge one."""
    files: dict[str, int] = {}
    for pattern in patterns:
        found = matching(names, pattern)
        if not found:
            raise RefusedError(f"dataset {where} has no file matching {pattern}")
        files.update(found)
    if len(files) > MAX_FILES or any(size > MAX_DATASET_FILE_BYTES for size in files.values()):
        raise RefusedError(f"dataset {where}: {list(patterns)} match over {MAX_FILES} files or a huge one")
    return files


RETRY_WAITS = tuple(float(w) for w in os.environ.get("TPU_RL_RETRY_WAITS", "30,90").split(",") if w)
"""Seconds between the tries of an operation that failed for any reason but a refusal (the Hub, GCS, a reset, a 403
while a new grant propagates): three tries, 30 s and then 90 s apart (each call has its library's own retries besides),
then exit 1. A failed set-up fails its step at once (podFailurePolicy), and for training the next `up`'s retry pays the
whole start-up again. Each operation resumes from the cache entry, the record and the run's folder.
(``TPU_RL_RETRY_WAITS``, comma-separated, replaces the waits: the tests' fake clock; no manifest sets it.)"""


def describe(err: Exception) -> str:
    """One line for an error of a library: a Google API error by its status and reason (its text leads with the
    request's URL, both objects' paths for a copy, which would crowd the reason out), anything else by its type and
    words; a 403 names where the grants are."""
    from google.api_core.exceptions import GoogleAPICallError

    if isinstance(err, GoogleAPICallError):
        reasons = [e.get("message") for e in err.errors or () if isinstance(e, dict) and e.get("message")]
        words = reasons[0] if reasons else re.sub(r"^[A-Z]+ \S+: ", "", err.message or "")
        hint = (
            ": the pod's account lacks a grant on the bucket (docs/permissions.md; a new grant takes up to 7 min)"
            if err.code == 403
            else ""
        )
        return f"{type(err).__name__} ({err.code}): {' '.join(str(words).split())[:300]}{hint}"
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def operation(argv: list[str]) -> Callable[[], str]:
    """The operation ``argv`` names, refused (exit 3) when it names none."""
    if argv[:1] == ["snapshot"] and len(argv) == 7:
        return lambda: snapshot(*argv[1:])
    if argv[:1] == ["fetch"] and len(argv) == 3:
        return lambda: fetch(*argv[1:])
    raise RefusedError(
        "usage: base_snapshot.py snapshot REPO REVISION CONVERT_URI CACHE_URI DIR SHARED_URI | fetch CONVERT_URI DIR"
    )


def main(
    argv: list[str],
    sleep: Callable[[float], None] = time.sleep,
    parse: Callable[[list[str]], Callable[[], str]] = operation,
) -> None:
    """Run the operation ``parse`` reads of ``argv`` (this program's, or ``stage_dataset.py``'s), again after each
    wait of ``RETRY_WAITS`` while it fails for a reason that may pass; print the commit. Exit 3 at once for a refusal,
    1 once the tries are spent: one line each."""
    try:
        run = parse(argv)
        for wait in (*RETRY_WAITS, None):
            try:
                commit = run()
                break
            except RefusedError:
                raise
            except Exception as err:  # noqa: BLE001 (the Hub, GCS and anything else: one line)
                line = str(err) if isinstance(err, FailedError) else describe(err)
                if wait is None:
                    log(f"{line} (tried {len(RETRY_WAITS) + 1} times)")
                    sys.exit(1)
                log(f"{line}; trying again in {wait:g} s")
                sleep(wait)
    except RefusedError as err:
        log(str(err))
        sys.exit(REFUSED)
    print(commit, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
