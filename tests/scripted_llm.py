"""A scripted LLMBackend for tests: answers from a function of each request, records what it was sent.

The answer function gets the ChatRequest and returns the reply text or a full ChatResult (for errors
and score-mode log-probs). Everything else -- prompts, the call cache, parsing, retries of the format
reminder -- is the real LLMBackend code.
"""

from crossprofile_lib.backends.base import ChatResult
from crossprofile_lib.backends.llm import LLMBackend
from crossprofile_lib.task.tokenizer import default_tokenizer


class Scripted(LLMBackend):
    """Answers from a function of the prompt; counts what reaches the 'provider'."""

    provider = "scripted"

    def __init__(self, answer, mode="generate", **kw):
        super().__init__("s1", mode, default_tokenizer(), kw.pop("cache", ":memory:"), **kw)
        self.answer, self.sent = answer, []

    def identity(self):
        return {"provider": "scripted", "model": self.model, "base_url": None}

    def _complete(self, requests, on_done):
        for j, r in enumerate(requests):
            self.sent.append(r)
            out = self.answer(r)
            on_done(j, out if isinstance(out, ChatResult) else ChatResult(out))
