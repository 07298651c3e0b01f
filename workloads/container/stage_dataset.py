"""A training dataset's files at one commit, staged for a run from the stack's **dataset cache**, each taken from the
Hub once and checked against the Hub's hash of it (run in the MaxText image as ``python3 /tpu-rl/stage_dataset.py``, a
file of training's ConfigMap beside ``base_snapshot.py``, whose shared code it imports from that folder, and what that
imports).

    python3 stage_dataset.py REPO REVISION URI CACHE_URI PATTERN...

The files of the Hub dataset ``REPO`` at ``REVISION`` that match the ``PATTERN``s (``fnmatch``, paths in the
repository: ``base_snapshot.selected``, which `up`'s preflight checks too) are staged under the ``gs://`` folder
``URI`` (the run's) from the cache ``CACHE_URI``, one entry ``<CACHE_URI><repo>/<commit>/`` per dataset and commit
(its files and ``entry.json``, written last: what it holds as the Hub describes it, and the patterns it holds whole).
Every file is hashed before it is used, against the hash the Hub names it by (``core.hf_model.HubFile``: the LFS
sha256, else the Git blob id), never taken on its size: a cached object is read at one generation and hashed
(``base_snapshot.held_copy``, as the conversion reads the Hub cache), and one of another hash is one line and fetched
from the Hub again (hashed) into the entry; the run's copy is made from the generation hashed (a rewrite inside GCS:
no byte leaves Google). The Hub is asked which commit a branch names and for its files' hashes (one API call, no
file); a commit whose entry holds every pattern, with each file's hash, costs no call: the entry is the stack's own
(its bucket's ``<model>/train/hub/``, which only the stack's training writes), its record of the Hub's hashes. A later
attempt of the same run finds ``dataset.json`` (written last) under ``URI`` and reads nothing. MaxText reads the run's
copy (``hf_train_files``/``hf_eval_files`` are ``gs://`` patterns: ``datasets`` globs them through gcsfs).

Exit 0 with the commit on stdout; 3 for a refusal (no such dataset or revision, a pattern that matches nothing, a
damaged record); 1 when the Hub or GCS still fails after three tries (``base_snapshot.RETRY_WAITS``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core import hf_model
    from workloads.container import base_snapshot as base
    from workloads.container.tpu_rl_program import RefusedError
else:  # python3 /tpu-rl/stage_dataset.py: what it imports are files of its ConfigMap (hf_model.py: core's)
    import base_snapshot as base
    import hf_model
    from tpu_rl_program import RefusedError

DATASET_RECORD = "dataset.json"
"""A staged dataset's record, written last: ``{"repo", "revision", "commit", "files": {name: size}, "cache",
"verified": {name: {"object", "generation", "size", "sha256" | "blobId"}}}`` (the cache object each file was copied
from, at the generation hashed)."""
TIMEOUT = base.TIMEOUT


@dataclass(frozen=True)
class DatasetEntry:
    """A dataset cache entry's ``entry.json``: each file it holds as the Hub describes it (a number: its size alone, as
    an entry of an earlier version records it), and the patterns whose every match it holds."""

    files: dict[str, hf_model.HubFile | int]
    patterns: tuple[str, ...]


def read_dataset_record(bucket: Any, prefix: str, uri: str, repo: str) -> dict[str, Any] | None:
    """A staged dataset's record, None when it is not staged (yet)."""
    blob = bucket.blob(prefix + DATASET_RECORD)
    if not blob.exists(timeout=TIMEOUT):
        return None
    data = blob.download_as_bytes(start=0, end=base.MAX_FILE_BYTES - 1, timeout=TIMEOUT)
    try:
        record = hf_model.json_document(data, f"{uri}{DATASET_RECORD}")
    except hf_model.JsonDocumentError as err:
        raise RefusedError(str(err)) from None
    files = record.get("files") if isinstance(record, dict) else None
    if not (
        isinstance(record, dict)
        and record.get("repo") == repo
        and isinstance(record.get("commit"), str)
        and base.COMMIT.fullmatch(record["commit"])
        and isinstance(files, dict)
        and all(isinstance(n, str) and base.dataset_path_problem(n) is None for n in files)
    ):
        raise RefusedError(f"{uri}{DATASET_RECORD} is not the record of {repo} staged here")
    return record


def read_dataset_entry(bucket: Any, prefix: str, uri: str, repo: str, commit: str) -> DatasetEntry | None:
    """A dataset's cache entry (``{"repo", "commit", "files": {name: {"size", "sha256" | "blobId"}}, "patterns"}``; an
    earlier version's names a file by its size), None when there is none yet. A damaged one is refused naming the
    entry to delete (the step's next try fills it again)."""
    try:
        entry = base.entry_json(bucket, prefix)
    except hf_model.JsonDocumentError:
        raise RefusedError(f"{uri}{base.ENTRY} is not JSON: {base.AGAIN.format(uri=uri)}") from None
    if entry is None:
        return None
    ours = isinstance(entry, dict) and (entry.get("repo"), entry.get("commit")) == (repo, commit)
    files: Any = entry.get("files") if ours else None
    patterns: Any = entry.get("patterns") if ours else None
    named = isinstance(files, dict) and all(isinstance(n, str) and base.dataset_path_problem(n) is None for n in files)
    found = {name: hf_model.recorded_file(value) or value for name, value in files.items()} if named else {}
    shaped = named and all(isinstance(v, hf_model.HubFile) or (type(v) is int and v >= 0) for v in found.values())
    if not (shaped and isinstance(patterns, list) and all(isinstance(p, str) for p in patterns)):
        raise RefusedError(f"{uri}{base.ENTRY} is not the cache entry of {repo}@{commit}: {base.AGAIN.format(uri=uri)}")
    return DatasetEntry(found, tuple(patterns))


def hub_dataset_files(repo: str, revision: str, patterns: tuple[str, ...]) -> tuple[str, dict[str, hf_model.HubFile]]:
    """The commit ``revision`` names on the Hub and the files of it that match ``patterns``, each as the Hub names its
    content (one API call, no file)."""
    info = base.hub_info(repo, revision, dataset=True)
    siblings = {s.rfilename: s for s in info.siblings or [] if isinstance(s.rfilename, str)}
    where = f"{repo}@{info.sha}"
    chosen = base.selected({name: int(s.size or 0) for name, s in siblings.items()}, patterns, where)
    return info.sha, {name: base.sibling_file(siblings[name], f"dataset {where}") for name in chosen}


def held_files(held: DatasetEntry | None, patterns: tuple[str, ...], where: str) -> dict[str, hf_model.HubFile] | None:
    """What the stack's entry of a commit records of the files ``patterns`` match, None when it cannot say: no entry,
    a pattern it does not hold whole, a file recorded by its size alone, or a record edited by hand to claim a pattern
    with no file (the Hub then says what the patterns match)."""
    if held is None or not set(patterns) <= set(held.patterns):
        return None
    try:
        sizes = {n: found.size if isinstance(found, hf_model.HubFile) else found for n, found in held.files.items()}
        chosen = base.selected(sizes, patterns, where)
    except RefusedError:
        return None
    files = {name: held.files[name] for name in chosen}
    hashed = {name: found for name, found in files.items() if isinstance(found, hf_model.HubFile)}
    return hashed if len(hashed) == len(files) else None


def kept_from_hub(repo: str, commit: str, name: str, expected: hf_model.HubFile, cache_uri: str, work: Path) -> int:
    """``name`` from the Hub (hashed, ``base_snapshot.from_hub``) through the folder ``work`` into the cache entry
    ``cache_uri``; the generation it was kept at."""
    bucket, prefix = base.folder(cache_uri)
    got = base.from_hub(repo, name, commit, expected, work, dataset=True)
    blob = bucket.blob(prefix + name)
    blob.upload_from_filename(str(got), timeout=TIMEOUT * 60)
    got.unlink()
    base.log(f"{name} of dataset {repo}@{commit[:12]} from the Hub, its {expected.kind} checked, kept in {cache_uri}")
    return int(blob.generation)


def cache_dataset(  # noqa: PLR0913 (the dataset, its commit, its files and patterns, and where they are kept)
    repo: str, commit: str, files: dict[str, hf_model.HubFile], patterns: tuple[str, ...], cache_uri: str
) -> dict[str, int]:
    """Every file of ``files`` into the cache entry ``cache_uri``, each checked against its hash: one the entry holds
    as ``files`` names it is read at one generation and hashed (``base_snapshot.held_copy``); one it lacks, or holds
    otherwise (one line), comes from the Hub (hashed) through a temporary file. Then ``entry.json``, written last,
    naming what the entry now holds and the patterns whose every file it holds. The generation of each file hashed."""
    bucket, prefix = base.folder(cache_uri)
    before = read_dataset_entry(bucket, prefix, cache_uri, repo, commit) or DatasetEntry({}, ())
    verified: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="tpu-rl-dataset-") as work:
        for name, expected in sorted(files.items()):
            claim = found if isinstance(found := before.files.get(name), hf_model.HubFile) else None
            generation, problem = base.held_copy(bucket, prefix + name, expected, cache_uri + name, "the Hub's", claim)
            if problem is not None:
                base.log(f"{problem}: not used")
            if generation is None:
                generation = kept_from_hub(repo, commit, name, expected, cache_uri, Path(work))
            verified[name] = generation
    held: dict[str, hf_model.HubFile | int] = {**before.files, **files}
    kept = sorted(set(before.patterns) | set(patterns))
    if held != before.files or kept != sorted(before.patterns):
        recorded = {n: f.as_json() if isinstance(f, hf_model.HubFile) else f for n, f in sorted(held.items())}
        entry = {"repo": repo, "commit": commit, "files": recorded, "patterns": kept}
        bucket.blob(prefix + base.ENTRY).upload_from_string(
            json.dumps(entry, sort_keys=True), content_type="application/json", timeout=TIMEOUT
        )
    return verified


def copy(cache_uri: str, uri: str, verified: dict[str, int]) -> None:
    """Each cached object of ``verified`` into the run's folder ``uri``, at the generation hashed (a rewrite inside
    GCS, its ``sourceGeneration``: GCS copies those bytes or answers 404 when they were replaced since)."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    source, source_prefix = base.folder(cache_uri)
    bucket, prefix = base.folder(uri)
    for name, generation in sorted(verified.items()):
        target, token = bucket.blob(prefix + name), None
        while True:  # a rewrite may take several calls for a large object (the API's rewriteToken)
            # The same copy again is harmless, so a transient error is retried (the library retries a rewrite
            # only under a generation precondition by default, and a failed setup fails the whole training).
            token, _, _ = target.rewrite(
                source.blob(source_prefix + name, generation=generation),
                token=token,
                timeout=TIMEOUT * 5,
                retry=DEFAULT_RETRY,
            )
            if token is None:
                break


def stage_dataset(repo: str, revision: str, uri: str, cache_root: str, *patterns: str) -> str:
    """The files of the Hub dataset ``repo`` at ``revision`` that match ``patterns``, staged under ``uri`` from the
    dataset cache ``cache_root``, each hashed against the Hub's hash of it; the commit."""
    bucket, prefix = base.folder(uri)
    base.folder(cache_root)  # a gs:// folder, refused before anything is read
    record = read_dataset_record(bucket, prefix, uri, repo)
    if record is not None:
        base.log(f"dataset {repo}@{record['commit'][:12]}: {len(record['files'])} files staged in {uri}")
        return str(record["commit"])
    files: dict[str, hf_model.HubFile] | None = None
    commit = revision
    if base.COMMIT.fullmatch(revision):
        cache_uri = base.entry_uri(cache_root, repo, revision)
        held = read_dataset_entry(*base.folder(cache_uri), cache_uri, repo, revision)
        files = held_files(held, patterns, f"{repo}@{revision}")
    if files is None:
        commit, files = hub_dataset_files(repo, revision, patterns)
    cache_uri = base.entry_uri(cache_root, repo, commit)
    verified = cache_dataset(repo, commit, files, patterns, cache_uri)
    copy(cache_uri, uri, verified)
    base.log(f"{len(files)} files of dataset {repo}@{commit[:12]} copied from {cache_uri} to {uri}")
    pins = {n: {"object": cache_uri + n, "generation": g, **files[n].as_json()} for n, g in verified.items()}
    sizes = {name: found.size for name, found in files.items()}
    body = {"repo": repo, "revision": revision, "commit": commit, "files": sizes, "cache": cache_uri, "verified": pins}
    bucket.blob(prefix + DATASET_RECORD).upload_from_string(
        json.dumps(body, sort_keys=True), content_type="application/json", timeout=TIMEOUT
    )
    return commit


def operation(argv: list[str]) -> Callable[[], str]:
    """The staging ``argv`` names, refused (exit 3) when it names none."""
    if len(argv) >= 5:
        return lambda: stage_dataset(*argv)
    raise RefusedError("usage: stage_dataset.py REPO REVISION URI CACHE_URI PATTERN...")


if __name__ == "__main__":
    base.main(sys.argv[1:], parse=operation)
