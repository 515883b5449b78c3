"""Chat templates (:class:`ChatTemplate`): score mode renders the prompt itself, to prefill the reply with
``Decision:``; :func:`score_text` is the text a score-mode call reports.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Optional, Sequence

from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.safety.inputs import (
    CHAT_TEMPLATE_MAX_BYTES,
    TOKENIZER_CONFIG_MAX_BYTES,
    InputError,
    input_file_problem,
    load_json,
    read_text,
)
from crossprofile_lib.task import llama_engine

SCORE_PREFILL = "Decision:"

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


class ChatTemplate:
    """A Hugging Face-style Jinja chat template, rendered as llama.cpp and transformers render it; a final
    ``assistant`` message is a *prefill* (the reply starts with its text). Sources: :meth:`from_spec`."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", name: str = ""):
        # optional: jinja2 comes with the llm / book extras, needed only for a chat template over HTTP
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        self.source, self.bos_token, self.eos_token = source, bos_token, eos_token
        self.sha = hashlib.sha256(f"{source}\0{bos_token}\0{eos_token}".encode()).hexdigest()[:16]
        self.name = name or f"template:{self.sha}"
        env = ImmutableSandboxedEnvironment(loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
        self._tmpl = env.from_string(source)

    @classmethod
    def from_engine(cls, engine, name: str = "") -> "ChatTemplate":
        """The chat template inside the GGUF file an engine (:mod:`crossprofile_lib.task.llama_engine`) holds."""
        src, bos, eos = engine.chat_template()
        if not src:
            raise ValueError(f"model {name or engine.path}: no tokenizer.chat_template in its metadata "
                             f"(pass chat_template=chatml or a .jinja file)")
        return cls(src, bos, eos, name=name)

    @classmethod
    def from_spec(cls, spec: str) -> "ChatTemplate":
        """``chatml``, ``gguf:PATH`` (a GGUF file's template), ``hf:FOLDER`` (its ``tokenizer_config.json``, or
        ``chat_template.jinja`` beside it as transformers 5 saves it) or a
        Jinja file, read through :mod:`crossprofile_lib.safety.inputs`; a template that does not compile or render
        is refused here (a ``ValueError`` naming the source), never later as one error row per call."""
        import jinja2
        t = cls._load_spec(str(spec))
        try:
            t.render([{"role": "user", "content": "x"}, {"role": "assistant", "content": SCORE_PREFILL}])
        except (jinja2.TemplateError, ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
            raise ValueError(f"chat_template '{spec}': cannot render a user message ({type(e).__name__}: {e})") from None
        return t

    @classmethod
    def _load_spec(cls, spec: str) -> "ChatTemplate":
        import jinja2
        if spec == "chatml":
            return cls(CHATML, "", "<|im_end|>", name="chatml")
        kind, _, arg = spec.partition(":")
        try:
            if kind == "gguf":
                if problem := input_file_problem(arg):
                    raise ValueError(f"chat_template '{spec}': the GGUF file {problem}")
                with open(arg, "rb") as fh:
                    if fh.read(4) != b"GGUF":
                        raise ValueError(f"chat_template '{spec}': not a GGUF file (its first bytes are not 'GGUF')")
                try:
                    engine = llama_engine.open_vocab(arg)
                except ImportError as e:
                    raise ValueError(f"chat_template '{spec}': reading a GGUF file needs a llama.cpp engine ({e})") from None
                except (ValueError, RuntimeError, OSError) as e:
                    raise ValueError(f"chat_template '{spec}': llama.cpp cannot read it ({e})") from None
                return cls.from_engine(engine, name=spec)
            if kind == "hf":
                if not Path(arg).is_dir():
                    raise ValueError(f"chat_template '{spec}': '{arg}' is not a folder (hf:FOLDER names the folder "
                                     f"holding tokenizer_config.json)")
                cfg = load_json(Path(arg) / "tokenizer_config.json", TOKENIZER_CONFIG_MAX_BYTES,
                                what="tokenizer_config.json")
                src = cfg.get("chat_template") if isinstance(cfg, dict) else None
                if isinstance(src, list):  # named templates: the default one
                    src = next((d.get("template") for d in src if isinstance(d, dict) and d.get("name") == "default"),
                               None)
                jinja = Path(arg) / "chat_template.jinja"  # transformers 5 keeps the template in its own file
                if (not isinstance(src, str) or not src.strip()) and jinja.exists():
                    src = read_text(jinja, CHAT_TEMPLATE_MAX_BYTES, what="chat template", check_chars=False)
                if not isinstance(src, str) or not src.strip():
                    raise ValueError(f"chat_template '{spec}': {arg} has no chat template (neither a chat_template "
                                     f"string in tokenizer_config.json nor chat_template.jinja)")
                tok = {k: (v.get("content", "") if isinstance(v, dict) else (v or "")) for k, v in cfg.items()
                       if k in ("bos_token", "eos_token")}
                return cls(src, str(tok.get("bos_token", "")), str(tok.get("eos_token", "")), name=spec)
            problem = input_file_problem(spec)
            if problem == "does not exist":
                raise ValueError(f"chat_template '{spec}': not chatml, gguf:PATH, hf:FOLDER or an existing file")
            if problem:
                raise ValueError(f"chat_template '{spec}': {problem}")
            return cls(read_text(spec, CHAT_TEMPLATE_MAX_BYTES, what="chat template", check_chars=False),
                       name=Path(spec).name)
        except InputError as e:
            raise ValueError(f"chat_template '{spec}': {e}") from None
        except jinja2.TemplateSyntaxError as e:
            raise ValueError(f"chat_template '{spec}': not a valid Jinja template (line {e.lineno}: {e.message})") from None

    def render(self, messages: Sequence[dict]) -> str:
        msgs = [dict(m) for m in messages]
        prefill = msgs.pop()["content"] if msgs and msgs[-1]["role"] == "assistant" else ""

        def raise_exception(msg):
            raise ValueError(f"chat template: {msg}")
        return self._tmpl.render(messages=msgs, add_generation_prompt=True, bos_token=self.bos_token,
                                 eos_token=self.eos_token, raise_exception=raise_exception) + prefill


def score_text(request: ChatRequest, best: Optional[str]) -> str:
    """The text a score-mode call reports: the prefill plus the best choice (``Decision: B``)."""
    if best is None:
        return ""
    last = request.messages[-1] if request.messages else {}
    return f"{last['content']} {best}" if last.get("role") == "assistant" else best
