"""The natural-discussion protocol on HiddenBench (SPEC section 9). A *session* (task, seed, prompt ablation):
1. agent ``A{i}`` sees the description, the lettered options and its facts (shared and ``hidden[i-1]``, shuffled);
2. a private **initial vote**; 3. **round 1** in a seeded speaking order, each agent seeing the earlier messages, then
**round 2**, each seeing every other agent's latest message (a message: at most ``max_words`` words asked, one line,
no leading tag, cut to ``2 * max_words``); 4. a **final vote**; 5. the **group answer**; 6. **claims** from each
message, on which the memory policies and the decision call run. A vote is read from the first JSON object of the
reply (a letter or an answer's text); an unreadable vote is retried once, then ``invalid``. ``constrained_votes``
adds a JSON schema. Sessions run in lockstep, one ``backend.chat`` batch per step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from crossprofile_lib.backends.base import ChatRequest, ChatResult
from crossprofile_lib.hiddenbench.ablations import PROMPT_FILES, Ablation
from crossprofile_lib.hiddenbench.claims import (
    RawClaim,
    extract_request,
    grey_pairs,
    json_values,
    merge_claims,
    parse_claims,
    sentence_claims,
)
from crossprofile_lib.hiddenbench.common import (
    PolicyPlan,
    build_memories,
    decide,
    decision_columns,
    fact_ids,
    json_sha,
    option_id,
    protocol_unsupported,
    task_view,
)
from crossprofile_lib.hiddenbench.disclosure import disclosure, facts_restated
from crossprofile_lib.hiddenbench.importer import HiddenBenchTask
from crossprofile_lib.hiddenbench.measures import group_vote
from crossprofile_lib.prompts import lettered_options, letters_for, letters_text, render
from crossprofile_lib.rng import stream
from crossprofile_lib.task.decision import option_order
from crossprofile_lib.task.discussion import Transcript, Utterance
from crossprofile_lib.task.variants import agent_names

MAX_WORDS = 60
VOTE_MAX_TOKENS = 100
RATIONALE_CHARS = 80
#: A message is one paragraph: generation stops at a blank line (a rambling small model stops early).
MESSAGE_STOP = ("\n\n",)
_LETTER = re.compile(r"^\(?\s*(?:option\s+)?([A-J])\s*[).:]?\s*$", re.IGNORECASE)
_TAG = re.compile(r"^[\s*]*(?:A\d{1,2}|Agent\s*\d{1,2}|Message)[\s*]*:[\s*]*", re.IGNORECASE)


def vote_schema(letters: Sequence[str]) -> dict:
    """The vote's JSON schema; the rationale is bounded so a looping small model stops early."""
    return {"type": "object", "properties": {"vote": {"type": "string", "enum": list(letters)},
                                             "rationale": {"type": "string", "maxLength": RATIONALE_CHARS}},
            "required": ["vote", "rationale"], "additionalProperties": False}


def parse_vote(text: str, letters: Sequence[str], answers: Sequence[str]) -> tuple[Optional[str], str]:
    """``(letter or None, rationale)`` from a vote reply; ``answers`` in letter order."""
    for obj in json_values(text or "", "{"):   # each a JSON object
        low = {str(k).strip().casefold(): v for k, v in obj.items()}
        v = low.get("vote")
        if not isinstance(v, str):
            continue
        rat = low.get("rationale")
        rat = rat if isinstance(rat, str) else ""
        m = _LETTER.match(v.strip())
        if m and m.group(1).upper() in letters:
            return m.group(1).upper(), rat
        norm = " ".join(v.split()).casefold()
        for letter, a in zip(letters, answers):
            if norm == " ".join(a.split()).casefold():
                return letter, rat
        return None, rat
    return None, ""


def message_max_tokens(max_words: int) -> int:
    """Generation cap of a round message: about 1.5 tokens per allowed word, plus a margin."""
    return (3 * max_words) // 2 + 16


def clean_message(text: str, max_words: int) -> str:
    """One line, no leading speaker tag, at most ``2 * max_words`` words."""
    words = _TAG.sub("", (text or "").strip()).split()
    return " ".join(words[:2 * max_words])


def _retry_request(req: ChatRequest, reply: str, prompt: str, **values) -> ChatRequest:
    """``req``'s conversation with the reply and a format reminder (``PROMPT_FILES[prompt]``) added."""
    p = render(PROMPT_FILES[prompt], **values)
    return ChatRequest(req.messages + ({"role": "assistant", "content": reply or ""}, p.message()),
                       max_tokens=req.max_tokens, purpose=req.purpose + "-retry", prompt_file=PROMPT_FILES[prompt],
                       json_schema=req.json_schema)


@dataclass
class Vote:
    agent: str
    phase: str
    letter: Optional[str] = None
    rationale: str = ""
    raw: list = field(default_factory=list)
    retried: bool = False

    @property
    def invalid(self) -> bool:
        return self.letter is None


@dataclass
class Message:
    index: int
    round: int
    speaker: str
    text: str
    raw: str


class Session:
    """One task x seed x ablation of the natural protocol (state between lockstep steps)."""

    def __init__(self, task: HiddenBenchTask, seed: int, ablation: Ablation, max_words: int = MAX_WORDS,
                 constrained_votes: bool = False):
        self.task, self.seed, self.ablation, self.max_words = task, seed, ablation, max_words
        self.constrained_votes = constrained_votes
        self.view = task_view(task, seed)
        self.order_ids = option_order(self.view)
        self.letters = letters_for(self.order_ids)
        self.answers = tuple(self.view.template.option(o).name for o in self.order_ids)
        self.options_text = lettered_options(self.view.template, self.order_ids)
        self.agents = agent_names(task.n_agents)
        rng = stream(seed, "hb-natural", task.id, "speaking-order")
        self.speaking_order = tuple(self.agents[i] for i in rng.permutation(task.n_agents))
        self.facts = {}
        for k, a in enumerate(self.agents):
            held = [*task.shared, task.hidden[k]]
            perm = stream(seed, "hb-natural", task.id, "facts", a).permutation(len(held))
            self.facts[a] = [held[j] for j in perm]
        self.votes: dict[tuple[str, str], Vote] = {}
        self.messages: list[Message] = []
        self.extraction: list[dict] = []
        self.calls: list[dict] = []

    # -- prompt pieces -------------------------------------------------------------------
    @property
    def key(self) -> str:
        return f"{self.view.task_id}/{self.ablation.name}"

    def facts_text(self, agent: str) -> str:
        return "\n".join(f"{i + 1}. {f}" for i, f in enumerate(self.facts[agent]))

    def transcript_text(self) -> str:
        return "\n".join(f"{m.speaker} (round {m.round}): {m.text}" for m in self.messages) or "(no messages)"

    def _system(self, agent: str) -> dict:
        return {"role": "system", "content": render(PROMPT_FILES["system"], agent=agent,
                                                    n_agents=self.task.n_agents).text}

    def option_of(self, letter: Optional[str]) -> Optional[str]:
        return None if letter is None else self.order_ids[self.letters.index(letter)]

    def correct_letter(self) -> str:
        return self.letters[self.order_ids.index(option_id(self.task.correct_index))]

    # -- requests ------------------------------------------------------------------------
    def vote_request(self, agent: str, phase: str) -> ChatRequest:
        name = PROMPT_FILES["vote_initial" if phase == "initial" else "vote_final"]
        values = dict(description=self.task.description, options=self.options_text,
                      facts=self.facts_text(agent), letters=letters_text(self.letters))
        if phase == "final":
            values["discussion"] = self.transcript_text()
        p = render(name, **values)
        return ChatRequest((self._system(agent), p.message()), max_tokens=VOTE_MAX_TOKENS,
                           purpose=f"hb-vote-{phase}", prompt_file=name,
                           json_schema=vote_schema(self.letters) if self.constrained_votes else None)

    def vote_reminder(self, agent: str) -> str:
        v = self.votes.get((agent, "initial"))
        if v is None or v.invalid:
            return "none (your vote could not be read)"
        return f"{v.letter} ({self.answers[self.letters.index(v.letter)]})"

    def message_request(self, agent: str, rnd: int) -> ChatRequest:
        if rnd == 1:
            lines = [f"{m.speaker}: {m.text}" for m in self.messages]
            scope = "Messages so far in this round"
        else:
            latest = {m.speaker: m for m in self.messages}
            lines = [f"{a}: {latest[a].text}" for a in self.speaking_order if a != agent and a in latest]
            scope = "The latest message of each other member"
        values = dict(description=self.task.description, options=self.options_text, facts=self.facts_text(agent),
                      round=rnd, discussion_scope=scope, discussion="\n".join(lines) or "(no messages yet)",
                      max_words=self.max_words)
        if self.ablation.shows_initial_vote:
            values["initial_vote"] = self.vote_reminder(agent)
        name = self.ablation.message_prompt
        p = render(name, **values)
        return ChatRequest((self._system(agent), p.message()), max_tokens=message_max_tokens(self.max_words),
                           purpose=f"hb-message-r{rnd}", prompt_file=name, stop=MESSAGE_STOP)

    def log(self, req: ChatRequest, res: ChatResult, agent: str = "") -> None:
        self.calls.append(dict(purpose=req.purpose, agent=agent, prompt_file=req.prompt_file,
                               rendered_sha=json_sha(list(req.messages)), cached=bool(res.cached), error=res.error,
                               retries=res.retries, completion_tokens=res.completion_tokens))


def _chat(backend, items: list[tuple[Session, ChatRequest, str]]) -> list[ChatResult]:
    if not items:
        return []
    results = backend.chat([r for _, r, _ in items])
    if len(results) != len(items):
        raise RuntimeError(f"backend {backend.name} returned {len(results)} results for {len(items)} requests")
    for (s, req, agent), res in zip(items, results):
        s.log(req, res, agent)
    return results


def _votes(backend, sessions: Sequence[Session], phase: str) -> None:
    items = [(s, s.vote_request(a, phase), a) for s in sessions for a in s.speaking_order]
    retry = []
    for (s, req, a), res in zip(items, _chat(backend, items)):
        text = "" if res.error else res.text
        v = Vote(a, phase, *parse_vote(text, s.letters, s.answers), raw=[text])
        s.votes[(a, phase)] = v
        if v.invalid:
            retry.append((s, _retry_request(req, text, "vote_retry", letters=letters_text(s.letters)), a))
    for (s, _, a), res in zip(retry, _chat(backend, retry)):
        text = "" if res.error else res.text
        v = s.votes[(a, phase)]
        v.retried = True
        v.raw.append(text)
        v.letter, v.rationale = parse_vote(text, s.letters, s.answers)


def _round(backend, sessions: Sequence[Session], rnd: int) -> None:
    for k in range(max(s.task.n_agents for s in sessions)):
        items = [(s, s.message_request(s.speaking_order[k], rnd), s.speaking_order[k])
                 for s in sessions if k < s.task.n_agents]
        for (s, _, a), res in zip(items, _chat(backend, items)):
            raw = "" if res.error else res.text
            s.messages.append(Message(len(s.messages), rnd, a, clean_message(raw, s.max_words), raw))


def _extract(backend, sessions: Sequence[Session]) -> None:
    owners = [(s, m) for s in sessions for m in s.messages if m.text]
    items = [(s, extract_request(m.speaker, m.text, "hb-extract"), m.speaker) for s, m in owners]
    retry, state = [], []
    for (s, req, a), (_, m), res in zip(items, owners, _chat(backend, items)):
        text = "" if res.error else res.text
        claims, ok = parse_claims(text)
        rec = dict(message_index=m.index, speaker=m.speaker, raw=[text], claims=claims, readable=ok,
                   retried=False, fallback=False)
        s.extraction.append(rec)
        if not ok:
            retry.append((s, _retry_request(req, text, "extract_retry"), a))
            state.append((rec, m))
    for (s, _, a), (rec, m), res in zip(retry, state, _chat(backend, retry)):
        text = "" if res.error else res.text
        claims, ok = parse_claims(text)
        rec.update(retried=True, readable=ok, claims=claims)
        rec["raw"].append(text)
        if not ok:
            rec.update(claims=sentence_claims(m.text), fallback=True)


def _merge(backend, sessions: Sequence[Session], confirm: bool) -> list:
    raws = [[RawClaim(r["speaker"], r["message_index"], c) for r in s.extraction for c in r["claims"]]
            for s in sessions]
    answers: list[dict] = [{} for _ in sessions]
    if confirm:
        items, keys = [], []
        for j, (s, raw) in enumerate(zip(sessions, raws)):
            for i, rep in grey_pairs(raw):
                p = render(PROMPT_FILES["confirm_duplicate"], first=raw[rep].text, second=raw[i].text)
                items.append((s, ChatRequest((p.message(),), max_tokens=4, purpose="hb-confirm-duplicate",
                                             prompt_file=PROMPT_FILES["confirm_duplicate"], choices=("yes", "no")),
                              ""))
                keys.append((j, i, rep))
        for (j, i, rep), res in zip(keys, _chat(backend, items)):
            said = re.findall(r"\b(yes|no)\b", (res.text or "").casefold())
            answers[j][(i, rep)] = bool(said) and said[-1] == "yes"   # the last yes/no (grammar: "Decision: yes")
    return [(raw, merge_claims(raw, s.speaking_order, s.agents,
                               confirm=(lambda i, rep, a=a: a.get((i, rep), False)) if confirm else None))
            for s, raw, a in zip(sessions, raws, answers)]


def run_natural_chunk(units: Sequence[tuple[HiddenBenchTask, int, Ablation]], plan: PolicyPlan,
                      budgets: Sequence[str], backend, base_columns: dict, max_words: int = MAX_WORDS,
                      confirm_duplicates: bool = False, constrained_votes: bool = False) -> Iterable[dict]:
    """Run the sessions of ``units`` in lockstep; yield one artefact record per session."""
    why = protocol_unsupported("natural", backend, backend.name)
    if why:
        raise ValueError(why)
    sessions = [Session(t, seed, abl, max_words, constrained_votes) for t, seed, abl in units]
    if not sessions:
        return
    _votes(backend, sessions, "initial")
    _round(backend, sessions, 1)
    _round(backend, sessions, 2)
    _votes(backend, sessions, "final")
    _extract(backend, sessions)
    merged = _merge(backend, sessions, confirm_duplicates)
    staged = []
    for s, (raw, mg) in zip(sessions, merged):
        tr = Transcript(s.speaking_order, tuple(Utterance(m.index, m.speaker, m.text) for m in s.messages))
        pairs = list(build_memories(s.view, mg.claim_list, tr, plan, budgets, backend, s.key, by_ids=False))
        staged.append((s, raw, mg, pairs))
    decisions = iter(decide(backend, [req for *_, pairs in staged for req, _ in pairs]))
    for s, raw, mg, pairs in staged:
        yield _record(s, raw, mg, pairs, decisions, base_columns)


def _record(s: Session, raw, mg, pairs, decisions, base: dict) -> dict:
    task = s.task
    common = dict(base, protocol="natural", task_id=task.id, task_name=task.name, n_agents=task.n_agents,
                  n_options=task.n_options, seed=s.seed, ablation=s.ablation.name)
    correct = s.correct_letter()
    failed = [c["error"] for c in s.calls if c["error"]]
    # a session with a failed call is failed in every row: its votes and discussion are incomplete
    session_error = (f"{len(failed)} of {len(s.calls)} calls of the session failed: {failed[0]}" if failed else "")
    vote_rows = []
    for phase in ("initial", "final"):
        for pos, a in enumerate(s.speaking_order):
            v = s.votes[(a, phase)]
            vote_rows.append(dict(common, agent=a, speaking_position=pos, phase=phase, vote_letter=v.letter or "",
                                  vote=s.answers[s.letters.index(v.letter)] if v.letter else "",
                                  correct=v.letter == correct, invalid=v.invalid, retried=v.retried, error=session_error))
    gv = group_vote([(a, s.option_of(s.votes[(a, "final")].letter)) for a in s.speaking_order], task.n_agents)
    disc = disclosure(task.hidden, s.agents, [(m.speaker, m.text) for m in s.messages])
    rows, memories = [], []
    for req, row in pairs:
        d = next(decisions)
        text = row.pop("memory_text")
        dc = decision_columns(task, req, d, "; ".join(e for e in (session_error, row.pop("error")) if e))
        memories.append(dict(policy=row["policy"], budget=row["budget_label"], text=text,
                             tokens=row["memory_tokens"], decision=(d.letter if d else None),
                             invalid=(d.invalid if d else None), raw=(d.raw if d else None), error=dc["error"]))
        rows.append(dict(common, **row, **dc))
    ex = s.extraction
    session_row = dict(
        common, group_vote=(s.view.template.option(gv.option).name if gv.option else ""),
        group_correct=gv.option == option_id(task.correct_index), group_invalid=gv.option is None,
        group_tie=gv.tie, group_strict_majority=gv.strict_majority, n_valid_final_votes=gv.n_valid,
        initial_accuracy=sum(r["correct"] for r in vote_rows if r["phase"] == "initial") / task.n_agents,
        final_accuracy=sum(r["correct"] for r in vote_rows if r["phase"] == "final") / task.n_agents,
        initial_invalid=sum(r["invalid"] for r in vote_rows if r["phase"] == "initial"),
        final_invalid=sum(r["invalid"] for r in vote_rows if r["phase"] == "final"),
        vote_retries=sum(r["retried"] for r in vote_rows),
        n_hidden=task.n_agents, hidden_disclosed=disc.n_disclosed, disclosure_rate=disc.rate,
        holder_disclosure_rate=disc.holder_rate, n_messages=len(s.messages),
        empty_messages=sum(1 for m in s.messages if not m.text),
        n_claims_raw=mg.n_raw, n_claims=len(mg.claim_list), extraction_retries=sum(r["retried"] for r in ex),
        extraction_fallbacks=sum(r["fallback"] for r in ex),
        merges_confirmed=sum(1 for *_, y in mg.confirmed_pairs if y),
        chat_calls=len(s.calls), chat_cached=sum(c["cached"] for c in s.calls),
        chat_errors=sum(1 for c in s.calls if c["error"]), error=session_error)
    if session_error:  # not results: what they would have scored is missing, not wrong
        for r in vote_rows:
            r["correct"] = None
        session_row.update(group_correct=None, initial_accuracy=float("nan"), final_accuracy=float("nan"))
    sids, hids = fact_ids(task)
    claims = [dict(text=c.text, speakers=list(c.speakers), first_mention=c.first_mention,
                   restates=[i for i, ok in zip(hids + sids, facts_restated((*task.hidden, *task.shared), [c.text])) if ok])
              for c in mg.claim_list.claims]
    art = dict(
        speaking_order=list(s.speaking_order), options=dict(zip(s.letters, s.answers)), correct_letter=correct,
        facts={a: s.facts[a] for a in s.agents},
        votes=[dict(agent=v.agent, phase=v.phase, letter=v.letter, rationale=v.rationale, invalid=v.invalid,
                    retried=v.retried, raw=v.raw) for v in s.votes.values()],
        messages=[dict(index=m.index, round=m.round, speaker=m.speaker, text=m.text, raw=m.raw) for m in s.messages],
        extraction=ex, raw_claims=[dict(speaker=r.speaker, message_index=r.message_index, text=r.text) for r in raw],
        merge=dict(cluster=list(mg.cluster), confirmed=[list(p) for p in mg.confirmed_pairs]),
        claims=claims,
        disclosure=dict(disclosed=list(disc.disclosed), by_holder=list(disc.by_holder),
                        first_message=list(disc.first_message)),
        group=dict(option=gv.option, tie=gv.tie, strict_majority=gv.strict_majority),
        memories=memories, calls=s.calls)
    errors = sum(1 for t in (vote_rows, [session_row], rows) for r in t if r["error"])
    return dict(protocol="natural", task_id=task.id, seed=s.seed, ablation=s.ablation.name, errors=errors,
                artefacts=art, rows=dict(votes=vote_rows, sessions=[session_row], decisions=rows))
