"""What every language-model backend shares: the cached ``chat()`` and the paper's calls built on it.

A provider subclass of :class:`LLMBackend` implements :meth:`LLMBackend.identity` (what the cache key names: never an
API key nor a base URL; :meth:`LLMBackend.legacy_identities`: what earlier versions keyed on, looked up on a miss and
copied forward) and :meth:`LLMBackend._complete` (send uncached requests, report each as it finishes). Here: ``chat``
(cache look-up, identical requests sent once, one entry committed per finished call, progress bar); ``decide``
(parsed as ``Decision: <letter>``; an unparsable answer is retried once with the format reminder, then counts as
wrong and ``invalid``); ``relevance`` (JSON ``{"relevant": [numbers]}``); ``summarise`` (B3); ``stances`` (BAL).

Decision modes (recorded in every row): ``generate`` (the paper's: free generation at temperature 0, reasoning then
``Decision: X``); ``grammar`` (constrained to one paragraph of reasoning and a valid ``Decision: X``; JSON-schema
requests to the schema); ``score`` (the reply prefilled with ``Decision:``, the letters' next-token log-probabilities
compared; where a server returns only its top log-probabilities, a letter missing from them counts as ``-inf`` and is
named in the row's ``letters_missing`` and counted in the run's summary; none present is invalid; JSON-schema requests
as in ``grammar``).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import Counter
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
from crossprofile_lib.backends.chat_template import CHATML, SCORE_PREFILL, ChatTemplate, score_text  # noqa: F401
from crossprofile_lib.safety.inputs import option_number
from crossprofile_lib.task.decision import Decision, DecisionRequest, option_order
from crossprofile_lib.task.evidence import Stance
from crossprofile_lib.task.tokenizer import default_tokenizer, get_tokenizer

DECISION_MODES = ("generate", "grammar", "score")
#: Reasoning is bounded in ``grammar`` mode so the constrained answer always ends in time.
GRAMMAR_REASON_CHARS = 400
TOP_LOGPROBS = 20

_DECISION_RE = re.compile(r"decision\s*[:：]\s*[*_\s]*[(\[]?\s*([A-J])\b", re.IGNORECASE)


# --- parsing ------------------------------------------------------------------------------

def parse_decision(text: str, letters: Sequence[str]) -> Optional[str]:
    """The letter of the last ``Decision: X`` in ``text`` if X is one of ``letters``, else None."""
    found = [m.group(1).upper() for m in _DECISION_RE.finditer(text or "")]
    return found[-1] if found and found[-1] in letters else None


def _json_list(text: str, field: str) -> Optional[list]:
    """The list ``field`` of the JSON object spanning the first ``{`` to the last ``}`` of ``text``, else None."""
    m = re.search(r"\{.*\}", text or "", re.DOTALL)
    try:
        obj = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        return None
    items = obj.get(field) if isinstance(obj, dict) else None
    return items if isinstance(items, list) else None


def relevance_schema(n: int) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["relevant"],
            "properties": {"relevant": {"type": "array", "maxItems": n,
                                        "items": {"type": "integer", "minimum": 1, "maximum": n}}}}


def parse_relevance(text: str, n: int) -> Optional[list[int]]:
    """0-based indices from ``{"relevant": [1, 4]}`` (or a bare list of numbers after
    ``relevant``); numbers outside 1..n are dropped; None when nothing parses."""
    nums = _json_list(text, "relevant")
    if nums is None:
        m = re.search(r"relevant\W*\[?([\d,\s]+)", text or "", re.IGNORECASE)
        if not m:
            return None
        nums = [int(x) for x in re.findall(r"\d+", m.group(1))]
    nums = [x for x in nums if isinstance(x, int) and not isinstance(x, bool)]
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
    return max((c for c in choices if c in (lps or {})), key=lambda c: lps[c], default=None)  # max: the first of equals


def decision_gbnf(letters: Sequence[str], reason_chars: int = GRAMMAR_REASON_CHARS) -> str:
    """llama.cpp grammar: one paragraph of reasoning (at most ``reason_chars``), then the decision."""
    alts = " | ".join(f'"{c}"' for c in letters)
    return (f'root ::= reason "\\nDecision: " choice\n'
            f'reason ::= [^\\n]{{0,{reason_chars}}}\n'
            f'choice ::= {alts}\n')


def decision_regex(letters: Sequence[str], reason_chars: int = GRAMMAR_REASON_CHARS) -> str:
    """The same constraint as :func:`decision_gbnf` as a regular expression (vLLM)."""
    return f"[^\\n]{{0,{reason_chars}}}\\nDecision: ({'|'.join(letters)})"


# --- BAL's stance call (crossprofile_lib.policies.bal): the model sees the task, the options and the claims' texts
# (never roles, labels or speaker counts); a claim left out or garbled gets no stance (BAL keeps it last).

STANCE = "stance_v1.txt"


def stance_schema(n: int, letters: Sequence[str]) -> dict:
    item = {"type": "object", "additionalProperties": False,
            "required": ["n", "option", "direction", "criterion"],
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": n},
                           "option": {"type": "string", "enum": list(letters)},
                           "direction": {"type": "string", "enum": ["for", "against"]},
                           "criterion": {"type": "boolean"}}}
    return {"type": "object", "additionalProperties": False, "required": ["stances"],
            "properties": {"stances": {"type": "array", "maxItems": n, "items": item}}}


def stance_request(task, claims: Sequence, order: Sequence[str], constrained: bool) -> ChatRequest:
    t = task.template
    facts = "\n".join(f"{i + 1}. {c.text}" for i, c in enumerate(claims))
    prompt = P.render(STANCE, description=t.description, options=P.lettered_options(t, order), facts=facts)
    letters = P.letters_for(order)
    return ChatRequest((prompt.message(),), max_tokens=24 + 28 * len(claims), purpose="stance",
                       prompt_file=prompt.file, json_schema=stance_schema(len(claims), letters) if constrained else None)


def parse_stances(text: str, n: int, order: Sequence[str]) -> Optional[tuple[Optional[Stance], ...]]:
    """One stance (or None) per claim from the model's JSON; None when nothing parses.

    Entries with an unknown letter, direction or number are dropped; a number given twice
    keeps its first entry."""
    items = _json_list(text, "stances")
    if items is None:
        return None
    letters = P.letters_for(order)
    out: list[Optional[Stance]] = [None] * n
    for it in items:
        if not isinstance(it, dict):
            continue
        k, opt, d, crit = it.get("n"), it.get("option"), it.get("direction"), it.get("criterion")
        if not (isinstance(k, int) and 1 <= k <= n and out[k - 1] is None):
            continue
        if opt not in letters or d not in ("for", "against") or not isinstance(crit, bool):
            continue
        out[k - 1] = Stance(order[letters.index(opt)], 1 if d == "for" else -1, crit)
    return tuple(out)


def one_of(owner: str, option: str, value, allowed: Sequence[str]):
    """``value`` when it is one of ``allowed``, else a ``ValueError`` naming ``owner``'s option and the allowed values."""
    if value not in allowed:
        raise ValueError(f"{owner}: {option} '{value}' is not one of {', '.join(allowed)}")
    return value


def given_tokenizer(tokenizer):
    """A tokenizer given by name (:func:`~crossprofile_lib.task.tokenizer.get_tokenizer`) or as an object."""
    return get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer


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
        self.max_tokens = option_number(owner, "max_tokens", max_tokens, low=1, high=1_000_000, integer=True)
        # grammar mode: longest reasoning paragraph
        self.reason_chars = option_number(owner, "reason_chars", reason_chars, low=1, high=100_000, integer=True)
        self.decision_prompt = one_of(owner, "decision_prompt", decision_prompt, P.DECISION_PROMPTS)
        self.decision_mode = one_of(owner, "decision_mode", decision_mode, self.supported_modes)
        self.model = model
        self.tokenizer = tokenizer or default_tokenizer()
        self.cache = cache if isinstance(cache, CallCache) else CallCache(cache)
        self.progress = progress
        self.stats: Counter = Counter()
        self._lock = threading.Lock()
        self._legacy_noted = False

    def _count(self, **n: int) -> None:
        with self._lock:
            self.stats.update(n)

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

    def legacy_notice(self, n_missing: int, requests=()) -> Optional[str]:
        """A line said once when ``requests`` (the calls not in the cache) were made by an earlier version."""
        return None

    def record(self) -> dict:
        """What ``run.json`` records of this backend's requests (sampling, ...)."""
        return {}

    # -- chat --
    def cache_key(self, request: ChatRequest) -> str:
        return call_key(self.identity(), request, self.decision_mode)

    def _legacy_hits(self, requests: list, first: dict, found: dict) -> None:
        """Misses (``first``: key -> index of its first request) found under a legacy identity: copied under the new
        key and added to ``found``."""
        missing = [k for k in first if k not in found]
        for ident in self.legacy_identities() if missing else ():
            old = {k: call_key(ident, requests[first[k]], self.decision_mode) for k in missing}
            hits = self.cache.get_many(old.values())
            copied = {k: hits[o] for k, o in old.items() if o in hits}
            for k in copied:
                self.cache.copy(old[k], k)
            found.update(copied)
            if copied:
                self._count(legacy=len(copied))  # answered from entries made by an earlier version
            missing = [k for k in missing if k not in found]
            if not missing:
                break
        note = self.legacy_notice(len(missing), [requests[first[k]] for k in missing]) if (
            missing and not self._legacy_noted) else None
        if note:
            self._legacy_noted = True
            print(note, file=sys.stderr)

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order; cached where possible (see module doc)."""
        requests = list(requests)
        keys = [self.cache_key(r) for r in requests]
        found = self.cache.get_many(keys)
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        self._legacy_hits(requests, first, found)
        todo_keys = [k for k in dict.fromkeys(keys) if k not in found]
        todo = [requests[first[k]] for k in todo_keys]
        # answered from the cache; the same call twice
        self._count(cached=sum(k in found for k in keys), deduplicated=sum(k not in found for k in keys) - len(todo))
        if todo:
            self.cache.will_store(len(todo))  # a read-only cache: stop before sending what it could not keep
            purposes = sorted({r.purpose for r in todo})
            bar = tqdm(total=len(todo), desc=f"{self.name} {'+'.join(purposes)}", unit="call",
                       disable=not self.progress, leave=False)
            self._bar = bar  # providers may show retry waves on it
            identity = self.stored_identity()

            def on_done(j: int, res: ChatResult) -> None:
                k = todo_keys[j]
                self.cache.put(k, todo[j], res, identity, self.decision_mode)
                found[k] = res
                self._count(calls=1, retries=res.retries, **({"errors": 1} if res.error is not None else {}))
                bar.update(1)
                bar.set_postfix(calls=self.stats["calls"], cached=self.stats["cached"],
                                invalid=self.stats["invalid"], errors=self.stats["errors"], refresh=False)

            try:
                self._complete(todo, on_done)
            finally:
                bar.close()
        lost = sum(k not in found for k in keys)  # a provider that failed to report a call: never drop it silently
        if lost:
            self._count(errors=lost)
        return [found.get(k) or ChatResult(text="", error="no result reported by the backend") for k in keys]

    # -- decisions --
    def _decision_request(self, req: DecisionRequest) -> ChatRequest:
        prompt = P.decision_prompt(req.task, req.memory, req.option_order, variant=self.decision_prompt)
        score = self.decision_mode == "score"
        prefill = ({"role": "assistant", "content": SCORE_PREFILL},) if score else ()
        return ChatRequest((prompt.message(), *prefill), max_tokens=1 if score else self.max_tokens, purpose="decision",
                           prompt_file=prompt.file, choices=P.letters_for(req.option_order))

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
        retry_reqs: dict[int, ChatRequest] = {}
        for i in redo:
            rem = P.format_reminder(requests[i].option_order)
            msgs = creqs[i].messages + ({"role": "assistant", "content": results[i].text}, rem.message())
            retry_reqs[i] = ChatRequest(msgs, max_tokens=self.max_tokens, purpose="decision-retry",
                                        prompt_file=rem.file, choices=creqs[i].choices)
        retried = dict(zip(redo, self.chat([retry_reqs[i] for i in redo]) if redo else []))
        for i, res in retried.items():
            parsed[i] = self._parse(res, letters[i])
        out = []
        for i, (req, res) in enumerate(zip(requests, results)):
            final = retried.get(i, res)
            letter = parsed[i]
            error = final.error or ""
            invalid = letter is None and not error
            self._count(invalid=int(invalid), decisions=1)
            if res.error is None and not res.cached:
                self.cache.set_parsed(self.cache_key(creqs[i]), letter if i not in retried else None)
            if i in retried and final.error is None and not final.cached:
                self.cache.set_parsed(self.cache_key(retry_reqs[i]), letter)
            option = req.option_order[P.LETTERS.index(letter)] if letter else None
            missing = "".join(c for c in letters[i] if c not in (res.choice_logprobs or {})) if (
                self.decision_mode == "score" and res.error is None) else ""
            if missing:  # outside the log-probabilities the server returned: counted as -inf, said so
                self._count(letters_missing=1)
            both = (res, final) if i in retried else (res,)
            meta = {"prompt_file": creqs[i].prompt_file, "prompt_sha": messages_sha(creqs[i].messages),
                    "cached": all(r.cached for r in both), "retries": sum(r.retries for r in both),
                    "format_retry": i in retried, "error": error,
                    "letter_logprobs": json.dumps(res.choice_logprobs, sort_keys=True) if res.choice_logprobs else "",
                    "letters_missing": missing,
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
            self._count(relevance_invalid=1)
            return Relevance.of((), invalid=True)
        return Relevance.of(idx)

    def stance_request(self, task, cl) -> ChatRequest:
        # constrained only in grammar mode: a JSON grammar over a dozen stances costs minutes per
        # call in llama.cpp on two cores, while score mode exists to avoid long constrained output
        return stance_request(task, cl.claims, option_order(task), self.decision_mode == "grammar")

    def stances(self, task, cl):
        """BAL's stance call (:func:`stance_request`): one stance (or None) per claim."""
        res = self.chat([self.stance_request(task, cl)])[0]
        parsed = parse_stances(res.text, len(cl), option_order(task)) if res.error is None else None
        if parsed is None:
            self._count(stance_invalid=1)
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
