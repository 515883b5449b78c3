"""A server's refusal where it is counted (issue 55: the backends wing's mutation survivors): a refused key (401,
403) stops the run at the first answer, a 404 after ``stop_on_refusal`` in a row, other statuses never; the message
names the server by its redacted URL, never its key, and says which status and rule. In process, on the
:class:`~crossprofile_lib.backends.http_faults.Refusals` mixin with a real ``openai`` error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from crossprofile_lib.backends.http_faults import REFUSAL_STATUSES, Refusals, ServerRefused  # noqa: E402

URL = "https://user:s3cretpw@llm.example/v1?key=abcd1234&api-version=2024"


class Counter(Refusals):
    def __init__(self, stop_on_refusal=3):
        self.name, self.model, self.base_urls = "openai", "qwen", [URL, "http://other.example/v1"]
        self.stop_on_refusal, self._refusals, self._tripped = stop_on_refusal, 0, None
        self.cache = SimpleNamespace(path="/tmp/calls.sqlite")

    def _scrub(self, text):
        return text.replace("s3cretpw", "***")


def error(status: int):
    req = httpx.Request("POST", URL)
    return openai.APIStatusError(f"Error code: {status}", response=httpx.Response(status, request=req), body=None)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_at_the_first_answer_with_a_redacted_url(status):
    c = Counter()
    with pytest.raises(ServerRefused) as e:
        c._refused(error(status), 0)
    msg = str(e.value)
    assert "s3cretpw" not in msg and "abcd1234" not in msg
    assert "the server at https://***@llm.example/v1?key=***&api-version=2024 answered" in msg
    assert f"HTTP {status} ({REFUSAL_STATUSES[status]})" in msg and "to 1 calls in a row for model 'qwen'" in msg
    assert "stop_on_refusal=3" in msg and "/tmp/calls.sqlite" in msg and c._tripped is e.value


def test_a_404_stops_after_stop_on_refusal_in_a_row_and_names_its_server():
    c = Counter(stop_on_refusal=3)
    c._refused(error(404), 1)
    c._refused(error(404), 1)
    assert c._refusals == 2 and c._tripped is None
    with pytest.raises(ServerRefused, match=r"http://other.example/v1 answered HTTP 404 .* to 3 calls in a row"):
        c._refused(error(404), 1)


@pytest.mark.parametrize("status, stop", [(500, 3), (429, 1), (401, 0), (404, 0)])
def test_other_statuses_and_a_zero_limit_never_stop(status, stop):
    c = Counter(stop_on_refusal=stop)
    for _ in range(5):
        c._refused(error(status), 0)
    assert c._tripped is None and c._refusals == 0
    c._refused(ValueError("not an HTTP error"), 0)
    assert c._refusals == 0
