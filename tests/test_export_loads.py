"""The exported model loads for real (slow tier: torch and transformers, pyproject's group slow).

A tiny random Gemma 4 made with transformers' own ``Gemma4Config`` and ``Gemma4ForConditionalGeneration``
(26B-A4B's shape of model: mixture-of-experts layers, a full-attention layer after five sliding ones, keys
equal to values there, a vision tower, no audio), saved with ``save_pretrained``, is the base the conversion verified
in the Hub cache. Its language model, changed as training changes it, is laid out as MaxText 0.2.5's ``to_huggingface``
writes it (``tests.hf_files.maxtext_files``: ``param_mapping.py`` names it under ``model.language_model.``,
``weight_dtype=bfloat16`` makes every tensor BF16, ``shard_checkpoint`` shards it, ``metadata={"format": "pt"}``),
the export step's real script runs through ``bash`` against fake-gcs-server, and transformers loads the
result: no missing, unexpected or mismatched key, the copied weights the base's, the trained ones MaxText's.
"""

from __future__ import annotations

import json

import pytest

from tests.hf_files import export_step, lay_out, maxtext_files, objects, run_export
from tests.tiny_gemma import tiny_gemma4

pytestmark = pytest.mark.slow

LANG = "model.language_model."


def raw(tensor) -> bytes:
    torch = pytest.importorskip("torch")
    return tensor.contiguous().view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("shard_bytes", [3 * 1024**3, 4096], ids=["one-file", "sharded"])
def test_the_whole_export_loads_with_transformers_and_holds_the_base_and_the_trained_weights(
    gcs, tmp_path, shard_bytes
):
    # Imported here, not at collection: every worker of the fast tier collects this module (and deselects it).
    torch = pytest.importorskip("torch", reason="the slow tier needs torch (make test-slow)")
    transformers = pytest.importorskip("transformers", reason="the slow tier needs transformers (make test-slow)")
    from safetensors.torch import load_file

    base_dir = tmp_path / "base"
    tiny_gemma4().save_pretrained(base_dir)
    base_files = {p.name: p.read_bytes() for p in base_dir.iterdir() if p.is_file()}
    base_weights = load_file(base_dir / "model.safetensors")
    trained = {n: (t.float() + 0.03125).to(torch.bfloat16) for n, t in base_weights.items() if n.startswith(LANG)}
    shapes = {n: ("BF16", list(t.shape)) for n, t in trained.items()}
    config = json.loads(base_files["config.json"])
    config.update(audio_config=None, transformers_version="5.5.0.dev0")  # MaxText's own copy of it
    step = export_step()
    bucket, prefix = lay_out(
        gcs, step, maxtext_files(shapes, {n: raw(t) for n, t in trained.items()}, config, shard_bytes), base_files
    )

    before = tmp_path / "maxtext"
    before.mkdir()
    for name, data in objects(gcs, bucket, prefix).items():
        (before / name).write_bytes(data)
    _, info = transformers.Gemma4ForConditionalGeneration.from_pretrained(before, output_loading_info=True)
    assert any(k.startswith("model.vision_tower.") for k in info["missing_keys"]), "MaxText's export alone lacks it"

    done = run_export(step, "http://127.0.0.1:9", tmp_path)  # the base from the objects the conversion verified
    assert done.returncode == 0, done.stderr
    after = tmp_path / "whole"
    after.mkdir()
    for name, data in objects(gcs, bucket, prefix).items():
        (after / name).write_bytes(data)
    model, info = transformers.Gemma4ForConditionalGeneration.from_pretrained(after, output_loading_info=True)
    assert {k: list(v) for k, v in info.items() if k != "error_msgs"} == {
        "missing_keys": [],
        "unexpected_keys": [],
        "mismatched_keys": [],
    }, info
    state = model.state_dict()
    for name, tensor in base_weights.items():
        expected = trained.get(name, tensor)
        assert state[name].dtype == torch.bfloat16 and torch.equal(state[name], expected), name
    auto = transformers.AutoModelForCausalLM.from_pretrained(after)
    assert type(auto).__name__ == "Gemma4ForConditionalGeneration", "AutoModelForCausalLM builds the whole model"
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[2, 10, 11, 12]])).logits
    assert logits.shape == (1, 4, 512) and torch.isfinite(logits.float()).all()
