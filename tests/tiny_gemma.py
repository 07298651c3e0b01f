"""A tiny Gemma 4 and a word-level tokenizer for it, saved as a Hugging Face model folder (slow tier: torch,
transformers and tokenizers from pyproject's group slow; each helper skips the test without them).

``tiny_gemma4`` is the random model ``tests/test_export_loads.py`` builds: transformers' own ``Gemma4Config`` and
``Gemma4ForConditionalGeneration`` with 26B-A4B's structure at toy sizes. ``tiny_tokenizer`` is a
``PreTrainedTokenizerFast`` over a ``tokenizers`` WordLevel model. Its vocabulary is the model's 512 ids, and
its chat template renders Gemma 4's turns (``<|turn>user`` ... ``<turn|>``, then ``<|turn>model`` for the
generation prompt). ``walk_chain`` rigs a model so that greedy decoding after a given token emits a given
sequence of words, whatever the prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SPECIAL = ("<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>")
"""Ids 0 to 5: Gemma 4's pad, eos and bos ids are 0, 1 and 2 (``Gemma4TextConfig``'s defaults)."""
VOCAB_SIZE = 512
END_OF_TURN = SPECIAL.index("<turn|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{{ message['content'] }}<turn|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)
"""Gemma 4's turns: one user turn, then the generation prompt ``<|turn>model``."""
GENERATION_CONFIG = {
    "bos_token_id": 2,
    "eos_token_id": [1, END_OF_TURN],
    "pad_token_id": 0,
    "do_sample": True,
    "temperature": 1.0,
    "top_k": 64,
    "top_p": 0.95,
}
"""A Gemma-like ``generation_config.json``: it samples by default, and stops at ``<eos>`` or the end of the turn."""


def slow_modules() -> tuple[Any, Any]:
    torch = pytest.importorskip("torch", reason="the slow tier needs torch (make test-slow)")
    transformers = pytest.importorskip("transformers", reason="the slow tier needs transformers (make test-slow)")
    return torch, transformers


def tiny_gemma4(tie_word_embeddings: bool = True) -> Any:
    """A random Gemma 4 of 26B-A4B's kind at toy sizes, in BF16 (as the base repositories store it)."""
    torch, transformers = slow_modules()
    text = {
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 6,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "global_head_dim": 16,
        "num_global_key_value_heads": 1,
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": VOCAB_SIZE,
        "enable_moe_block": True,
        "num_experts": 4,
        "top_k_experts": 2,
        "moe_intermediate_size": 16,
        "attention_k_eq_v": True,
        "sliding_window": 16,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "max_position_embeddings": 256,
        "tie_word_embeddings": tie_word_embeddings,
    }
    vision = {
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "global_head_dim": 8,
        "patch_size": 4,
        "position_embedding_size": 64,
        "standardize": True,
    }
    tokens = {"image_token_id": 500, "boi_token_id": 501, "eoi_token_id": 502, "video_token_id": 503}
    tokens.update(audio_token_id=504, boa_token_id=505, eoa_token_index=506)
    config = transformers.Gemma4Config(
        text_config=text,
        vision_config=vision,
        audio_config=None,
        tie_word_embeddings=tie_word_embeddings,
        **tokens,
    )
    torch.manual_seed(0)
    return transformers.Gemma4ForConditionalGeneration(config).to(torch.bfloat16)


def tiny_tokenizer(words: list[str]) -> Any:
    """A fast tokenizer of ``VOCAB_SIZE`` ids: ``SPECIAL``, then ``words``, then filler words ``w<id>``. It splits on
    whitespace (the special tokens first), and decodes by joining the words with spaces."""
    _, transformers = slow_modules()
    tokenizers = pytest.importorskip("tokenizers", reason="the slow tier needs tokenizers (make test-slow)")
    vocab = {token: i for i, token in enumerate([*SPECIAL, *words])}
    assert len(vocab) == len(SPECIAL) + len(words), "the words are distinct and none is special"
    vocab.update({f"w{i}": i for i in range(len(vocab), VOCAB_SIZE)})
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def walk_chain(model: Any, tokenizer: Any, chain: list[str]) -> None:
    """Rig ``model`` (untied: ``tiny_gemma4(tie_word_embeddings=False)``) so that greedy decoding after
    ``chain[0]`` emits ``chain[1:]``, one token per step, whatever came before.

    Every decoder layer's output projections are zeroed: attention's ``o_proj``, the dense MLP's ``down_proj`` and
    the experts' ``down_proj``. Each layer then adds nothing to the residual stream, so the last hidden state at
    a position is that position's token embedding (scaled and normalised). Each token of the chain gets its own
    basis direction as embedding, and the head maps that direction to the next token's logit alone.
    """
    torch, _ = slow_modules()
    assert model.lm_head.weight.data_ptr() != model.model.language_model.embed_tokens.weight.data_ptr(), "untied"
    ids = tokenizer.convert_tokens_to_ids(chain)
    assert len(set(ids)) == len(ids) and tokenizer.unk_token_id not in ids, chain
    language = model.model.language_model
    hidden = language.config.hidden_size
    assert len(ids) <= hidden
    with torch.no_grad():
        silenced = 0
        for name, parameter in language.layers.named_parameters():
            if name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight", "experts.down_proj")):
                parameter.zero_()
                silenced += 1
        assert silenced == 3 * language.config.num_hidden_layers, silenced
        model.lm_head.weight.zero_()
        for dimension, (token, following) in enumerate(zip(ids, ids[1:], strict=False)):
            direction = torch.zeros(hidden, dtype=language.embed_tokens.weight.dtype)
            direction[dimension] = 0.5
            language.embed_tokens.weight[token] = direction
            model.lm_head.weight[following, dimension] = 1.0


def model_folder(model: Any, tokenizer: Any, folder: Path) -> dict[str, bytes]:
    """``model`` and ``tokenizer`` saved with ``save_pretrained`` into ``folder``, with ``GENERATION_CONFIG``: the
    folder's files by name."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2))
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}
