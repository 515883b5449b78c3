"""A deterministic scripted chat backend for the HiddenBench tests (no model, no randomness).

It recognises the task from the prompt's description and answers by purpose:

* votes: the letter of the option the agent "believes": the correct answer when the text it
  sees restates every hidden fact of the task, else the first option (A); ``junk`` agents
  answer junk (``junk_once``: only the first time, so the retry succeeds);
* messages: "I know that <its hidden fact> I favour A." (its facts are in the prompt);
* extraction: one ``- `` line per sentence of the message (``junk_extract`` agents: junk);
* B3 summaries: the first words of the transcript the prompt shows (half the token cap's worth);
* decisions: correct when the memory restates every hidden fact, else the first wrong option.

Every request is kept in ``.requests`` for assertions.
"""

from __future__ import annotations

import re

from crossprofile_lib.backends.base import CHAT, MODEL_RELEVANCE, SUMMARISE, ChatBackend, ChatResult
from crossprofile_lib.hiddenbench.common import option_id
from crossprofile_lib.hiddenbench.disclosure import restates
from crossprofile_lib.task.decision import Decision
from crossprofile_lib.task.tokenizer import default_tokenizer

_AGENT = re.compile(r"You are (A\d+)")
_LETTERS = re.compile(r"^([A-J])\. ", re.MULTILINE)


class ScriptedBackend(ChatBackend):
    provider = "scripted"
    model = "fake-v1"
    decision_mode = "generate"
    relevance_kind = "model"
    capabilities = frozenset({CHAT, SUMMARISE, MODEL_RELEVANCE})

    def __init__(self, tasks, junk=(), junk_once=(), junk_extract=(), fail_on_call=False):
        self.tasks = list(tasks)
        self.tokenizer = default_tokenizer()
        self.junk, self.junk_once, self.junk_extract = set(junk), set(junk_once), set(junk_extract)
        self.fail_on_call = fail_on_call
        self.requests = []
        self.n_decisions = 0

    def _task(self, text: str):
        return next(t for t in self.tasks if t.description in text)

    def _vote(self, req) -> str:
        sys_text = req.messages[0]["content"]
        agent = _AGENT.search(sys_text).group(1)
        text = "\n".join(m["content"] for m in req.messages)
        retry = req.purpose.endswith("-retry")
        if agent in self.junk or (agent in self.junk_once and not retry):
            return "I think we should go with the first one!"
        task = self._task(text)
        letters = _LETTERS.findall(req.messages[1]["content"])
        answers = re.findall(r"^[A-J]\. (.*)$", req.messages[1]["content"], re.MULTILINE)
        if all(h in text for h in task.hidden):
            letter = letters[answers.index(task.correct_answer)]
        else:
            letter = letters[0]
        return f'Sure. {{"vote": "{letter}", "rationale": "Based on what I know."}}'

    def _message(self, req) -> str:
        user = req.messages[1]["content"]
        task = self._task(user)
        facts_block = user.split("Your information", 1)[1].split("This is round", 1)[0]
        mine = next(h for h in task.hidden if h in facts_block)
        return f"A9: I know that {mine} I favour A."

    def _extract(self, req) -> str:
        msg = req.messages[0]["content"]
        speaker = re.search(r"that (A\d+) wrote", msg).group(1)
        if speaker in self.junk_extract:
            return "no idea"
        body = msg.split("Message:\n", 1)[1].split("\n\nList every", 1)[0]
        body = body.replace("I know that ", "").replace(" I favour A.", "")
        return "\n".join(f"- {s.strip()}" for s in re.split(r"(?<=\.)\s+", body) if s.strip())

    def chat(self, requests):
        if self.fail_on_call:
            raise AssertionError("the backend was called although every session was on file")
        out = []
        for r in requests:
            self.requests.append(r)
            if r.purpose.startswith("hb-vote"):
                out.append(ChatResult(self._vote(r)))
            elif r.purpose.startswith("hb-message"):
                out.append(ChatResult(self._message(r)))
            elif r.purpose.startswith("hb-extract"):
                out.append(ChatResult(self._extract(r) if r.purpose == "hb-extract" else "still no idea"))
            elif r.purpose == "hb-confirm-duplicate":
                out.append(ChatResult("yes"))
            elif r.purpose == "b3":
                transcript = r.messages[0]["content"].split("what they said):\n", 1)[1].split("\n\nWrite a", 1)[0]
                out.append(ChatResult(" ".join(transcript.split()[: max(1, (r.max_tokens - 32) // 2)])))
            else:
                raise AssertionError(f"unexpected purpose {r.purpose}")
        return out

    def relevance(self, task, cl):
        return frozenset(range(len(cl)))

    def decide(self, requests):
        if self.fail_on_call:
            raise AssertionError("decide was called although every session was on file")
        out = []
        for r in requests:
            self.n_decisions += 1
            hb = r.task.source
            lines = [ln for ln in r.memory.text.split("\n") if ln.strip()]
            ok = all(any(restates(h, ln) for ln in lines) for h in hb.hidden)
            correct = option_id(hb.correct_index)
            opt = correct if ok else next(o for o in r.option_order if o != correct)
            letter = "ABCDEFGHIJ"[r.option_order.index(opt)]
            out.append(Decision(opt, letter, False, raw=f"Decision: {letter}"))
        return out
