"""Hugging Face model folders for tests, written the way ``save_pretrained`` and MaxText's ``to_huggingface``
write them: ``config.json``, safetensors shards written by the real ``safetensors`` library, the index and
the tokenizer's files. Gemma 4's names: the language model under ``model.language_model.``, a vision tower
MaxText leaves out and the export step copies from the base. And a proxy in front of fake-gcs-server that
ignores ``Range``, as a misbehaving endpoint would."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from core.hf_model import ModelLayout, Tensor
from tests.loopback import POLL_SECONDS

LANG = "model.language_model."
CONFIG: dict[str, Any] = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "text_config": {"model_type": "gemma4_text", "hidden_size": 4, "num_hidden_layers": 2, "vocab_size": 8},
    "vision_config": {"model_type": "gemma4_vision"},
}
LANGUAGE = {
    f"{LANG}embed_tokens.weight": ("BF16", [8, 4]),
    f"{LANG}norm.weight": ("BF16", [4]),
    **{f"{LANG}layers.{i}.self_attn.q_proj.weight": ("BF16", [4, 4]) for i in range(2)},
    **{f"{LANG}layers.{i}.experts.gate_up_proj": ("BF16", [2, 6, 4]) for i in range(2)},
    **{f"{LANG}layers.{i}.experts.down_proj": ("BF16", [2, 4, 3]) for i in range(2)},
}
VISION = {
    "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight": ("BF16", [4, 4]),
    "model.embed_vision.embedding_projection.weight": ("BF16", [4, 4]),
}
BYTES = {"BF16": 2, "F32": 4}


def tensor_data(name: str, dtype: str, shape: list[int]) -> bytes:
    """Bytes of a tensor that differ from tensor to tensor (a copy from the wrong place shows)."""
    seed = int.from_bytes(name.encode()[-8:].rjust(8, b"\0"), "little") ^ len(name)
    return random.Random(seed).randbytes(math.prod(shape) * BYTES[dtype])


def shard_bytes(tensors: dict[str, tuple[str, list[int]]], values: dict[str, bytes] | None = None) -> bytes:
    """A safetensors file, as the library writes it (zeros, or the bytes ``values`` gives a tensor)."""
    import numpy as np  # here, not at import: only the tests that write a shard pay for numpy
    import safetensors

    keep = []
    specs = {}
    for name, (dtype, shape) in tensors.items():
        count = math.prod(shape) * BYTES[dtype]
        raw = (values or {}).get(name)
        data = np.frombuffer(raw, dtype=np.uint8).copy() if raw is not None else np.zeros(count, dtype=np.uint8)
        keep.append(data)
        specs[name] = safetensors.TensorSpec(
            dtype={"BF16": "bfloat16", "F32": "float32"}[dtype],
            shape=shape,
            data_ptr=data.ctypes.data,
            data_len=data.nbytes,
        )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "shard.safetensors"
        safetensors.serialize_file(specs, str(path), metadata={"format": "pt"})
        return path.read_bytes()


def model_files(
    tensors: dict[str, tuple[str, list[int]]],
    shards: int,
    config: dict | None = None,
    values: dict[str, bytes] | None = None,
) -> dict[str, bytes]:
    """A model folder as ``save_pretrained`` and ``to_huggingface`` write it: config, shards, index, tokenizer."""
    names = sorted(tensors)
    groups = [names[i::shards] for i in range(shards)]
    files: dict[str, bytes] = {}
    weight_map = {}
    for i, group in enumerate(groups, 1):
        file = f"model-{i:05d}-of-{shards:05d}.safetensors"
        files[file] = shard_bytes({n: tensors[n] for n in group}, values)
        weight_map.update(dict.fromkeys(group, file))
    total = sum(math.prod(shape) * BYTES[dtype] for dtype, shape in tensors.values())
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}
    ).encode()
    files["config.json"] = json.dumps(config or CONFIG).encode()
    files["tokenizer.json"] = b'{"version": "1.0"}'
    files["tokenizer_config.json"] = b'{"tokenizer_class": "GemmaTokenizer"}'
    files["chat_template.jinja"] = b"{{ messages }}"
    return files


def layout(tensors: dict[str, tuple[str, list[int]]], config: dict | None = None) -> ModelLayout:
    return ModelLayout(
        config or CONFIG, {n: Tensor(d, tuple(s)) for n, (d, s) in tensors.items()}, dict.fromkeys(tensors, "m")
    )


def values_of(tensors: dict[str, tuple[str, list[int]]]) -> dict[str, bytes]:
    """Distinct bytes for every tensor (``tensor_data``)."""
    return {name: tensor_data(name, dtype, shape) for name, (dtype, shape) in tensors.items()}


MAXTEXT_SHARD_BYTES = 1024 * 1024 * 1024 * 3
"""MaxText's ``DEFAULT_MAX_SHARD_SIZE`` (0.2.4, 0.2.5) (``checkpoint_conversion/utils/utils.py``)."""


def maxtext_files(
    tensors: dict[str, tuple[str, list[int]]],
    values: dict[str, bytes],
    config: dict,
    max_shard_bytes: int = MAXTEXT_SHARD_BYTES,
) -> dict[str, bytes]:
    """An export as MaxText's ``to_huggingface`` (0.2.4, 0.2.5) writes it (``utils.py``: ``save_model_files``): the
    tokenizer's files (``tokenizer.save_pretrained``), ``config.json``, then ``shard_checkpoint``'s shards: the
    tensors in name order, a new shard when the next would pass ``max_shard_bytes``; one shard is
    ``model.safetensors`` with no index, more are ``model-00001-of-0000N.safetensors`` with an index
    (``json.dumps(index, indent=2)``, ``total_size`` the tensors' bytes); each written by the safetensors
    library with ``metadata={"format": "pt"}``."""
    groups: list[list[str]] = [[]]
    used = 0
    for name in sorted(tensors):
        dtype, shape = tensors[name]
        size = math.prod(shape) * BYTES[dtype]
        if used + size > max_shard_bytes and groups[-1]:
            groups.append([])
            used = 0
        groups[-1].append(name)
        used += size
    files = {
        "tokenizer.json": b'{"version": "1.0"}',
        "tokenizer_config.json": b'{"tokenizer_class": "GemmaTokenizer"}',
        "chat_template.jinja": b"{{ messages }}",
        "config.json": json.dumps(config, indent=2).encode(),
    }
    if len(groups) == 1:
        files["model.safetensors"] = shard_bytes({n: tensors[n] for n in groups[0]}, values)
        return files
    weight_map = {}
    for i, group in enumerate(groups, 1):
        file = f"model-{i:05d}-of-{len(groups):05d}.safetensors"
        files[file] = shard_bytes({n: tensors[n] for n in group}, values)
        weight_map.update(dict.fromkeys(group, file))
    total = sum(math.prod(shape) * BYTES[dtype] for dtype, shape in tensors.values())
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2
    ).encode()
    return files


def tensors_of(data: bytes) -> dict[str, bytes]:
    """Each tensor's bytes in a safetensors file, as the library reads them (``safetensors.deserialize``)."""
    import safetensors

    return {name: bytes(info["data"]) for name, info in safetensors.deserialize(data)}


class RangeIgnoringProxy:
    """A loopback proxy in front of fake-gcs-server that drops every request's ``Range`` header, so every
    ranged read is answered with the whole object (200), as an endpoint that ignores ``Range`` answers.
    ``sent`` counts the body bytes it passed on, per response."""

    def __init__(self, upstream: str) -> None:
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        target = urlsplit(upstream)
        host = target.hostname or ""
        assert host, upstream
        proxy = self
        self.sent: list[int] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("range", "host")}
                connection = http.client.HTTPConnection(host, target.port, timeout=30)
                connection.request(self.command, self.path, body=body, headers=headers)
                reply = connection.getresponse()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.end_headers()
                written = 0
                try:
                    while chunk := reply.read(65536):
                        self.wfile.write(chunk)
                        written += len(chunk)
                except OSError:
                    pass  # the client stopped reading
                proxy.sent.append(written)
                connection.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------------------------
# The export step, run as its pod runs it


def export_step(*overrides: str):
    """The prod stack's export step (with ``--set`` overrides)."""
    from tests.lifecycle_walk import settings
    from workloads.specs.step_specs import plan_workflow

    return plan_workflow(settings("prod", list(overrides))).export


def conversion_of(step) -> str:
    """The conversion output the export step fetches the base's files from (its script's ``fetch`` line)."""
    found = re.search(r" fetch (gs://\S+/) ", _script(step))
    assert found, "the export fetches the base's files from the conversion"
    return found.group(1)


def _script(step) -> str:
    pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["/bin/bash", "/tpu-rl/run.sh"]  # the step's ConfigMap's script
    return step.script


def lay_out(gcs, step, files: dict[str, bytes], base: dict[str, bytes] | None = None) -> tuple[str, str]:
    """The finished conversion (its record of ``tests.fake_hub.COMMIT``; with ``base``, the base's files in the
    stack's Hub cache and the record's ``verified`` objects, as ``base_snapshot.py`` leaves them: ``put_verified``),
    the trained checkpoint the scan finds, and the export as ``to_huggingface`` left it; (bucket, prefix)."""
    from tests.conftest import put, put_conversion

    bucket, _, prefix = step.output_uri.removeprefix("gs://").partition("/")
    if not gcs.lookup_bucket(bucket):
        gcs.create_bucket(bucket)
    put_conversion(gcs, conversion_of(step))
    if base is not None:
        put_verified(gcs, conversion_of(step), base, f"gs://{bucket}/gemma4-26b/convert/hub/")
    put(gcs, step.input_uri, "49/model_params/x", "49/commit_success.txt")
    for name, data in files.items():
        gcs.bucket(bucket).blob(prefix + name).upload_from_string(data)
    return bucket, prefix


def put_verified(gcs, convert_uri: str, base: dict[str, bytes], root: str) -> str:
    """The base's files in the Hub cache entry of ``REPO@COMMIT`` under ``root`` and the conversion's record naming
    each object at its generation with the Hub's size and hash (``base_snapshot.py`` ``VERIFIED``); the entry's
    folder."""
    from tests.fake_hub import COMMIT, REPO, sibling

    entry = f"{root}{REPO}/{COMMIT}/"
    bucket_name, _, prefix = entry.removeprefix("gs://").partition("/")
    if not gcs.lookup_bucket(bucket_name):
        gcs.create_bucket(bucket_name)
    verified = {}
    for name, data in base.items():
        blob = gcs.bucket(bucket_name).blob(prefix + name)
        blob.upload_from_string(data)
        found = sibling(name, data)
        kind = {"sha256": found["lfs"]["sha256"]} if "lfs" in found else {"blobId": found["blobId"]}
        verified[name] = {"object": entry + name, "generation": blob.generation, "size": len(data), **kind}
    record_bucket, _, record_prefix = convert_uri.removeprefix("gs://").partition("/")
    record = gcs.bucket(record_bucket).blob(record_prefix + "source.json")
    body = json.loads(record.download_as_bytes())
    record.upload_from_string(json.dumps({**body, "verified": verified}, sort_keys=True).encode())
    return entry


def run_export(step, hub_url: str, tmp_path: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    """The export step's container command as the pod runs it (``bash /tpu-rl/run.sh``, its ConfigMap's files in
    ``tmp_path``), ``python3`` the given interpreter; MaxText's ``python3 -m`` is a stand-in that does nothing (the
    test laid out what it writes), and so is the check of the image's MaxText (tests/test_maxtext_check.py runs it)."""
    from workloads.specs.commands import EXPORT_BASE_DIR

    files = tmp_path / "tpu-rl"  # the step's ConfigMap, mounted where the pod mounts it
    files.mkdir(exist_ok=True)
    for name, text in step.scripts["data"].items():
        (files / name).write_text(text)
    script = _script(step).replace(EXPORT_BASE_DIR, str(tmp_path / "base"))  # the pod's scratch volume
    (files / "run.sh").write_text(script.replace("/tpu-rl/", f"{files}/"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "python3"
    stand_ins = 'case "$1" in -m) echo "stand-in: $2"; exit 0;; */maxtext_check.py) echo "stand-in: $1"; exit 0;; esac'
    shim.write_text(f'#!/bin/sh\n{stand_ins}\nexec "{python}" "$@"\n')
    shim.chmod(0o755)
    env = {  # as the step's manifest sets it: no Hub token, the Hub switched off
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_ENDPOINT": hub_url,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "NO_GCE_CHECK": "True",
        "NO_PROXY": "127.0.0.1,localhost",
        "TMPDIR": str(tmp_path),
    }
    return subprocess.run(["bash", str(files / "run.sh")], env=env, capture_output=True, text=True, timeout=120)


def objects(gcs, bucket: str, prefix: str) -> dict[str, bytes]:
    return {
        b.name[len(prefix) :]: b.download_as_bytes() for b in gcs.list_blobs(bucket, prefix=prefix) if b.name != prefix
    }
