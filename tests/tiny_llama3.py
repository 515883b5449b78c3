"""A tiny random-weight Llama model with Llama-3.1's own tokenizer and a Llama-3 chat template, for the vLLM tests that
check the prompt token ids (a Llama-3 template writes ``<|begin_of_text|>`` itself, so a server or engine that adds a
BOS to the rendered text doubles it). Decisions from it are meaningless; its token ids are Llama-3.1's.

Run with the vLLM environment's Python (it needs torch and transformers)::

    .venv-vllm/bin/python tests/tiny_llama3.py OUT_FOLDER

The tokenizer is the suite's offline rebuild of llama.cpp's Llama-3 vocabulary (``crossprofile tokenizers fetch
llama-3.1``) with the special tokens and the BOS post-processor Meta's ``tokenizer.json`` has. The weights are drawn
from ``torch.manual_seed(0)``: the same folder every time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BOS, EOT = "<|begin_of_text|>", "<|eot_id|>"
#: Meta-Llama-3-8B-Instruct's chat template
TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
            "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
            "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
            "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>"
            "\n\n' }}{% endif %}")


def build(out: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from crossprofile_lib.task import vocabs
    vocabs.fetch(["llama-3.1"])
    tok = json.loads((vocabs.tokenizers_dir() / "llama-3.1.tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    special = sorted((i, t) for t, i in vocab.items() if i >= 128000)
    tok["added_tokens"] = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, t in special]
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": BOS, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {BOS: {"id": BOS, "ids": [vocab[BOS]], "tokens": [BOS]}}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tok))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": BOS, "eos_token": EOT, "add_bos_token": True, "model_max_length": 8192,
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": True}, indent=2))
    (out / "chat_template.jinja").write_text(TEMPLATE)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=8192,
                      rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=vocab[BOS], eos_token_id=vocab[EOT])
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": vocab[BOS], "eos_token_id": vocab[EOT]}))
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
