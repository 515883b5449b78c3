"""What every language-model backend shares: the cached ``chat()``, and the paper's decision,
relevance-filter and B3 calls built on it.

A provider subclass of :class:`LLMBackend` implements two things: :meth:`LLMBackend.identity`
(what the cache key names: provider, model, the served model, output-changing settings; never an
API key and, since the served-model identity, never a base URL: :meth:`LLMBackend.legacy_identities`
names the identities earlier versions keyed on, looked up when a key misses and copied forward)
and :meth:`LLMBackend._complete` (send uncached requests, report each result as it finishes).
Everything else lives here, once:

* ``chat(requests)``: cache look-up (identical requests in one batch are sent once), the
  provider call, one cache entry committed per finished call (resumability), progress bar;
* ``decide``: the decision prompt (:mod:`crossprofile_lib.prompts`); the answer is parsed as
  ``Decision: <letter>``; an unparsable answer is retried once with the format reminder; a
  second failure counts as wrong and ``invalid``;
* ``relevance``: one relevance-filter call per task (JSON ``{"relevant": [numbers]}``);
* ``summarise``: one B3 summary call (the policy, :mod:`crossprofile_lib.policies.b3`, renders
  the prompt, limits the words and cuts the answer to the budget);
* ``stances``: BAL's stance call (:mod:`.stance`).

Decision modes (recorded in every row):

* ``generate`` -- the paper's: free generation (temperature 0) of reasoning then
  ``Decision: X``;
* ``grammar`` -- generation constrained (llama.cpp grammar, vLLM structured outputs) to one
  paragraph of reasoning and a final ``Decision: X`` with X a valid letter; JSON-schema
  requests (relevance filter, votes) are constrained to the schema;
* ``score`` -- no generation: the reply is prefilled with ``Decision:`` and the option
  letters' log-probabilities as the next token are compared (``choice_logprobs``); JSON-schema
  requests are constrained as in ``grammar``. Letters missing from the top log-probabilities
  count as ``-inf``; when none is present the answer is invalid.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Callable, Optional, Sequence

from tqdm.auto import tqdm

from crossprofile_lib import prompts as P
from crossprofile_lib.backends.base import (
    CHAT,
    MODEL_RELEVANCE,
    MODEL_STANCES,
    SUMMARISE,
    ChatBackend,
    ChatRequest,
    ChatResult,
    Relevance,
    summary_request,
)
from crossprofile_lib.backends.cache import CallCache, call_key, messages_sha
from crossprofile_lib.backends.stance import parse_stances, stance_request
from crossprofile_lib.safety.inputs import (
    CHAT_TEMPLATE_MAX_BYTES,
    TOKENIZER_CONFIG_MAX_BYTES,
    InputError,
    input_file_problem,
    load_json,
    option_number,
    read_text,
)
from crossprofile_lib.task import llama_engine
from crossprofile_lib.task.decision import Decision, DecisionRequest, option_order
from crossprofile_lib.task.tokenizer import default_tokenizer

DECISION_MODES = ("generate", "grammar", "score")
SCORE_PREFILL = "Decision:"
#: Reasoning is bounded in ``grammar`` mode so the constrained answer always ends in time.
GRAMMAR_REASON_CHARS = 400
TOP_LOGPROBS = 20

_DECISION_RE = re.compile(r"decision\s*[:：]\s*[*_\s]*[(\[]?\s*([A-J])\b", re.IGNORECASE)


# --- parsing ------------------------------------------------------------------------------

def parse_decision(text: str, letters: Sequence[str]) -> Optional[str]:
    """The letter of the last ``Decision: X`` in ``text`` if X is one of ``letters``, else None."""
    found = [m.group(1).upper() for m in _DECISION_RE.finditer(text or "")]
    return found[-1] if found and found[-1] in letters else None


def relevance_schema(n: int) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["relevant"],
            "properties": {"relevant": {"type": "array", "maxItems": n,
                                        "items": {"type": "integer", "minimum": 1, "maximum": n}}}}


def parse_relevance(text: str, n: int) -> Optional[list[int]]:
    """0-based indices from ``{"relevant": [1, 4]}`` (or a bare list of numbers after
    ``relevant``); numbers outside 1..n are dropped; None when nothing parses."""
    text = text or ""
    m = re.search(r"\{.*\}", text, re.DOTALL)
    nums = None
    if m:
        try:
            obj = json.loads(m.group(0))
            if isinstance(obj, dict) and isinstance(obj.get("relevant"), list):
                nums = [x for x in obj["relevant"] if isinstance(x, int) and not isinstance(x, bool)]
        except json.JSONDecodeError:
            pass
    if nums is None:
        m = re.search(r"relevant\W*\[?([\d,\s]+)", text, re.IGNORECASE)
        if not m:
            return None
        nums = [int(x) for x in re.findall(r"\d+", m.group(1))]
    return sorted({x - 1 for x in nums if 1 <= x <= n})


def choice_logprobs(top: dict, choices: Sequence[str]) -> dict:
    """``{choice: log-probability}`` from a ``{token text: logprob}`` map; a choice matches a token
    equal to it after stripping spaces (``" A"`` and ``"A"``; the larger wins)."""
    out = {}
    for tok, lp in top.items():
        c = tok.strip()
        if c in choices and (c not in out or lp > out[c]):
            out[c] = float(lp)
    return out


def best_choice(lps: Optional[dict], choices: Sequence[str]) -> Optional[str]:
    """Arg-max over ``choices`` (ties: earlier choice); None when no choice has a log-probability."""
    if not lps:
        return None
    return max((c for c in choices if c in lps), key=lambda c: (lps[c], -choices.index(c)), default=None)


def decision_gbnf(letters: Sequence[str], reason_chars: int = GRAMMAR_REASON_CHARS) -> str:
    """llama.cpp grammar: one paragraph of reasoning (at most ``reason_chars``), then the decision."""
    alts = " | ".join(f'"{c}"' for c in letters)
    return (f'root ::= reason "\\nDecision: " choice\n'
            f'reason ::= [^\\n]{{0,{reason_chars}}}\n'
            f'choice ::= {alts}\n')


def decision_regex(letters: Sequence[str], reason_chars: int = GRAMMAR_REASON_CHARS) -> str:
    """The same constraint as :func:`decision_gbnf` as a regular expression (vLLM)."""
    return f"[^\\n]{{0,{reason_chars}}}\\nDecision: ({'|'.join(letters)})"


# --- the shared backend ------------------------------------------------------------------------

class LLMBackend(ChatBackend):
    """Base of the ``llamacpp``, ``openai``/``deepseek`` and ``vllm`` backends (see module doc)."""

    relevance_kind = "model"
    capabilities = frozenset({CHAT, SUMMARISE, MODEL_RELEVANCE, MODEL_STANCES})
    supported_modes: tuple[str, ...] = DECISION_MODES

    def __init__(self, model: str, decision_mode: str = "generate", tokenizer=None, cache=None,
                 progress: bool = False, max_tokens: int = 512, reason_chars: int = GRAMMAR_REASON_CHARS,
                 decision_prompt: str = "default"):
        owner = f"backend {self.provider}/{model}"
        max_tokens = option_number(owner, "max_tokens", max_tokens, low=1, high=1_000_000, integer=True)
        reason_chars = option_number(owner, "reason_chars", reason_chars, low=1, high=100_000, integer=True)
        if decision_prompt not in P.DECISION_PROMPTS:
            raise ValueError(f"backend {self.provider}/{model}: decision_prompt '{decision_prompt}' is not one of "
                             f"{', '.join(P.DECISION_PROMPTS)}")
        self.decision_prompt = decision_prompt
        if decision_mode not in self.supported_modes:
            raise ValueError(f"backend {self.provider}/{model}: decision_mode '{decision_mode}' is not one of "
                             f"{', '.join(self.supported_modes)}")
        self.model = model
        self.decision_mode = decision_mode
        self.tokenizer = tokenizer or default_tokenizer()
        self.cache = cache if isinstance(cache, CallCache) else CallCache(cache)
        self.progress = progress
        self.max_tokens = int(max_tokens)
        self.reason_chars = int(reason_chars)  # grammar mode: longest reasoning paragraph
        self.stats: Counter = Counter()
        self._lock = threading.Lock()
        self._legacy_noted = False

    # -- provider hooks --
    def identity(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _complete(self, requests: Sequence[ChatRequest],
                  on_done: Callable[[int, ChatResult], None]) -> None:  # pragma: no cover - abstract
        """Send ``requests`` (none cached); call ``on_done(i, result)`` as each one finishes."""
        raise NotImplementedError

    def stored_identity(self) -> dict:
        """The identity stored with each cache entry (the key's, plus where it was made)."""
        return self.identity()

    def legacy_identities(self) -> list:
        """Identities earlier versions keyed the same calls on (looked up when a key misses)."""
        return []

    def legacy_notice(self, n_missing: int) -> Optional[str]:
        return None

    def record(self) -> dict:
        """What ``run.json`` records of this backend's requests (sampling, ...)."""
        return {}

    # -- chat --
    def cache_key(self, request: ChatRequest) -> str:
        return call_key(self.identity(), request, self.decision_mode)

    def _legacy_hits(self, requests: list, keys: list, found: dict) -> None:
        """Misses found under a legacy identity: copied under the new key and added to ``found``."""
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        missing = [k for k in first if k not in found]
        for ident in self.legacy_identities() if missing else ():
            old = {k: call_key(ident, requests[first[k]], self.decision_mode) for k in missing}
            hits = self.cache.get_many(old.values())
            for k, o in old.items():
                if o in hits:
                    self.cache.copy(o, k)
                    found[k] = hits[o]
            n = sum(o in hits for o in old.values())
            if n:
                with self._lock:
                    self.stats["legacy"] += n  # answered from entries made by an earlier version
            missing = [k for k in missing if k not in found]
            if not missing:
                break
        note = self.legacy_notice(len(missing)) if missing and not self._legacy_noted else None
        if note:
            self._legacy_noted = True
            print(note, file=sys.stderr)

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order; cached where possible (see module doc)."""
        requests = list(requests)
        keys = [self.cache_key(r) for r in requests]
        found = self.cache.get_many(keys)
        self._legacy_hits(requests, keys, found)
        todo_keys = [k for k in dict.fromkeys(keys) if k not in found]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        todo = [requests[first[k]] for k in todo_keys]
        with self._lock:
            self.stats["cached"] += sum(k in found for k in keys)          # answered from the cache
            self.stats["deduplicated"] += sum(k not in found for k in keys) - len(todo)  # same call twice
        if todo:
            purposes = sorted({r.purpose for r in todo})
            bar = tqdm(total=len(todo), desc=f"{self.name} {'+'.join(purposes)}", unit="call",
                       disable=not self.progress, leave=False)
            self._bar = bar  # providers may show retry waves on it
            identity = self.stored_identity()

            def on_done(j: int, res: ChatResult) -> None:
                k = todo_keys[j]
                self.cache.put(k, todo[j], res, identity, self.decision_mode)
                found[k] = res
                with self._lock:
                    self.stats["calls"] += 1
                    self.stats["retries"] += res.retries
                    if res.error is not None:
                        self.stats["errors"] += 1
                bar.update(1)
                bar.set_postfix(calls=self.stats["calls"], cached=self.stats["cached"],
                                invalid=self.stats["invalid"], errors=self.stats["errors"], refresh=False)

            try:
                self._complete(todo, on_done)
            finally:
                bar.close()
        out = []
        for k in keys:
            r = found.get(k)
            if r is None:  # a provider that failed to report a call: never drop it silently
                r = ChatResult(text="", error="no result reported by the backend")
                with self._lock:
                    self.stats["errors"] += 1
            out.append(r)
        return out

    # -- decisions --
    def _decision_request(self, req: DecisionRequest) -> ChatRequest:
        prompt = P.decision_prompt(req.task, req.memory, req.option_order, variant=self.decision_prompt)
        letters = P.letters_for(req.option_order)
        if self.decision_mode == "score":
            return ChatRequest((prompt.message(), {"role": "assistant", "content": SCORE_PREFILL}), max_tokens=1,
                               purpose="decision", prompt_file=prompt.file, choices=letters)
        return ChatRequest((prompt.message(),), max_tokens=self.max_tokens, purpose="decision",
                           prompt_file=prompt.file, choices=letters)

    def _parse(self, res: ChatResult, letters: Sequence[str]) -> Optional[str]:
        if res.error is not None:
            return None
        if self.decision_mode == "score":
            return best_choice(res.choice_logprobs, list(letters))
        return parse_decision(res.text, letters)

    def decide(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        creqs = [self._decision_request(r) for r in requests]
        results = self.chat(creqs)
        letters = [P.letters_for(r.option_order) for r in requests]
        parsed = [self._parse(res, lt) for res, lt in zip(results, letters)]
        # one retry with the format reminder for unparsable answers (not for failed calls)
        redo = [i for i, (p, res) in enumerate(zip(parsed, results)) if p is None and res.error is None
                and self.decision_mode != "score"]
        retried: dict[int, ChatResult] = {}
        retry_reqs: dict[int, ChatRequest] = {}
        for i in redo:
            rem = P.format_reminder(requests[i].option_order)
            msgs = creqs[i].messages + ({"role": "assistant", "content": results[i].text}, rem.message())
            retry_reqs[i] = ChatRequest(msgs, max_tokens=self.max_tokens, purpose="decision-retry",
                                        prompt_file=rem.file, choices=creqs[i].choices)
        if redo:
            for i, res in zip(redo, self.chat([retry_reqs[i] for i in redo])):
                retried[i] = res
                parsed[i] = self._parse(res, letters[i])
        out = []
        for i, (req, res) in enumerate(zip(requests, results)):
            final = retried.get(i, res)
            letter = parsed[i]
            error = final.error or ""
            invalid = letter is None and not error
            with self._lock:
                self.stats["invalid"] += int(invalid)
                self.stats["decisions"] += 1
            if res.error is None and not res.cached:
                self.cache.set_parsed(self.cache_key(creqs[i]), letter if i not in retried else None)
            if i in retried and final.error is None and not final.cached:
                self.cache.set_parsed(self.cache_key(retry_reqs[i]), letter)
            option = req.option_order[P.LETTERS.index(letter)] if letter else None
            both = (res, final) if i in retried else (res,)
            meta = {"prompt_file": creqs[i].prompt_file, "prompt_sha": messages_sha(creqs[i].messages),
                    "cached": all(r.cached for r in both), "retries": sum(r.retries for r in both),
                    "format_retry": i in retried, "error": error,
                    "letter_logprobs": json.dumps(res.choice_logprobs, sort_keys=True) if res.choice_logprobs else "",
                    "latency_s": sum(r.latency_s for r in both)}
            out.append(Decision(option, letter, invalid, raw=final.text, meta=meta))
        return out

    # -- relevance filter --
    def relevance_request(self, task, cl) -> ChatRequest:
        prompt = P.relevance_prompt(task, cl.claims, option_order(task))
        schema = relevance_schema(len(cl)) if self.decision_mode in ("grammar", "score") else None
        return ChatRequest((prompt.message(),), max_tokens=16 + 4 * len(cl), purpose="relevance",
                           prompt_file=prompt.file, json_schema=schema)

    def relevance(self, task, cl) -> Relevance:
        res = self.chat([self.relevance_request(task, cl)])[0]
        if res.error is not None:
            return Relevance.of((), error=res.error)
        idx = parse_relevance(res.text, len(cl))
        if idx is None:
            with self._lock:
                self.stats["relevance_invalid"] += 1
            return Relevance.of((), invalid=True)
        return Relevance.of(idx)

    def stance_request(self, task, cl) -> ChatRequest:
        # constrained only in grammar mode: a JSON grammar over a dozen stances costs minutes per
        # call in llama.cpp on two cores, while score mode exists to avoid long constrained output
        return stance_request(task, cl.claims, option_order(task), self.decision_mode == "grammar")

    def stances(self, task, cl):
        """BAL's stance call (:mod:`.stance`): one stance (or None) per claim."""
        res = self.chat([self.stance_request(task, cl)])[0]
        parsed = parse_stances(res.text, len(cl), option_order(task)) if res.error is None else None
        if parsed is None:
            with self._lock:
                self.stats["stance_invalid"] += 1
            return tuple(None for _ in cl.claims)
        return parsed

    # -- batching the runner's per-task calls --
    def prefetch(self, relevance=(), summaries=(), stances=()) -> None:
        """Send all relevance (``(task, cl)``), B3 (``(prompt, max_tokens)``) and BAL stance
        (``(task, cl)``) calls of a grid as one batch, so the per-task calls the runner makes
        later are cache hits."""
        reqs = [self.relevance_request(t, cl) for t, cl in relevance]
        reqs += [self.stance_request(t, cl) for t, cl in stances]
        reqs += [summary_request(p, m) for p, m in summaries]
        if reqs:
            self.chat(reqs)



# --- chat templates (score mode renders the prompt itself, to prefill the reply) ---------------

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


class ChatTemplate:
    """A Hugging Face-style Jinja chat template, rendered as llama.cpp and transformers render it.

    A final ``assistant`` message is a *prefill*: the reply starts with its text (score mode
    prefills ``Decision:``). Sources (:meth:`from_spec`): ``chatml``; ``gguf:PATH`` (the template
    in a GGUF file's metadata); ``hf:FOLDER`` (``tokenizer_config.json``); a ``.jinja`` file.
    """

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", name: str = ""):
        # optional: jinja2 comes with the llm / book extras, needed only for a chat template over HTTP
        import jinja2
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
        """``chatml``, ``gguf:PATH``, ``hf:FOLDER`` or a Jinja file. Every file goes through the
        safe-input layer (:mod:`crossprofile_lib.safety.inputs`); a template that does not compile
        or cannot render a user message and a prefill is refused here, naming the source (a
        ``ValueError``), never later as one error row per call."""
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
                problem = input_file_problem(arg)
                if problem:
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
                if not isinstance(src, str) or not src.strip():
                    raise ValueError(f"chat_template '{spec}': {arg}/tokenizer_config.json has no chat_template "
                                     f"string")
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
