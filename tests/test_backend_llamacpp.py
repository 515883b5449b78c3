"""The embedded model (SmolLM2-135M via llama.cpp) end to end, and the same grid through
llama.cpp's OpenAI-compatible server (tests/llama_server.py: xllamacpp's llama-server, or
llama-cpp-python's): identical decisions in score mode.

Small on purpose (a dozen model calls per path): the whole file stays well under a minute or two
on two cores. Skipped, with the reason, only when no llama.cpp engine is installed.
"""

import json
import os
import subprocess
import time
import urllib.request

import llama_server as real_server
import numpy as np
import pytest

from crossprofile_lib.task.llama_engine import installed as _engines  # noqa: E402

if not _engines():
    pytest.skip("no llama.cpp engine is installed (run 'make install-llm')", allow_module_level=True)
pytestmark = [pytest.mark.llm, pytest.mark.slow]

from crossprofile_lib.backends import get_backend  # noqa: E402
from crossprofile_lib.backends.llamacpp import model_path  # noqa: E402
from crossprofile_lib.cli import main  # noqa: E402
from crossprofile_lib.run.results import read_results  # noqa: E402
from crossprofile_lib.run.runner import RunConfig, build_requests, run_grid, run_to_dir  # noqa: E402
from crossprofile_lib.task.templates import load_templates  # noqa: E402

ONE = "templates/dev/dev-hospital-01.yaml"
GRID = dict(templates=[ONE], seeds=[0], budgets=["0.6"], policies=["R1", "ALL", "EMPTY"], variants=["PSP", "SPS"])
THREADS = os.cpu_count() or 1


@pytest.fixture(scope="module")
def gguf():
    return str(model_path("smollm2-135m"))


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("embedded")
    b = get_backend("llamacpp/smollm2-135m", cache=out / "cache")
    df, header = run_to_dir(RunConfig(backend="llamacpp/smollm2-135m", **GRID), out / "run", backend=b)
    return df, header, b, out


def test_embedded_model_end_to_end(embedded_run, gguf):
    df, h, b, out = embedded_run
    assert len(df) == 6 and (df.error == "").all()
    assert not df.invalid.any(), "score mode always yields a valid letter"
    assert (df.decision_mode == "score").all() and (df.backend == "llamacpp/smollm2-135m").all()
    assert (df.tokenizer == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf").all()  # the model's own tokenizer sets budgets
    assert df.decision_letter.isin(["A", "B", "C"]).all()
    lps = [json.loads(x) for x in df.letter_logprobs]
    assert all(set(lp) <= {"A", "B", "C"} and max(lp, key=lp.get) == d for lp, d in zip(lps, df.decision_letter))
    header = json.loads((out / "run/run.json").read_text())
    assert header["backend"] == "llamacpp/smollm2-135m" and header["decision_mode"] == "score"
    assert header["tokenizer"].startswith("gguf:") and header["package_version"] and "git_commit" in header
    hr = header["headroom"]   # one template: every resample draws it, so the interval is the estimate
    rows = df[df.policy.isin(["ALL", "EMPTY"])].groupby("policy").correct.mean()
    assert hr["estimate"] == hr["lo"] == hr["hi"] == pytest.approx(100 * (rows["ALL"] - rows["EMPTY"]))
    assert hr["status"] == header["status"] == ("confirmatory" if hr["lo"] > 15 else "exploratory")
    assert b.stats["calls"] == len(set(df.prompt_sha)) < len(df)  # EMPTY is the same prompt in both variants


def test_rerun_makes_zero_model_calls(embedded_run):
    df, _, b, out = embedded_run
    b2 = get_backend("llamacpp/smollm2-135m", cache=out / "cache")
    df2 = run_grid(RunConfig(**GRID), b2)
    assert b2.stats["calls"] == 0 and df2.cached.all()
    assert list(df2.decision) == list(df.decision)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(gguf, tmp_path_factory):
    port = _free_port()
    log = open(tmp_path_factory.mktemp("server") / "server.log", "w")
    if real_server.KIND is None:
        pytest.skip(real_server.MISSING)
    p = subprocess.Popen(real_server.command(gguf, port, n_threads=THREADS), stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.time()
    while True:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            if p.poll() is not None or time.time() - t0 > 120:
                p.kill()
                pytest.fail(f"the {real_server.KIND} server did not start (see {log.name})")
            time.sleep(0.3)
    yield url
    p.terminate()
    p.wait(20)
    log.close()


def test_same_decisions_through_the_openai_compatible_server(embedded_run, llama_server, gguf, tmp_path):
    df, *_ = embedded_run
    b = get_backend("openai/smollm2-135m", base_url=llama_server, tokenizer=f"gguf:{gguf}", decision_mode="score",
                    chat_template=f"gguf:{gguf}", concurrency=1, cache=tmp_path / "cache")
    via = run_grid(RunConfig(**GRID), b)
    assert (via.error == "").all() and not via.invalid.any()
    assert list(via.memory_sha) == list(df.memory_sha) and list(via.prompt_sha) == list(df.prompt_sha)
    assert list(via.decision) == list(df.decision), "embedded and server paths must decide alike in score mode"
    a = [json.loads(x) for x in df.letter_logprobs]
    s = [json.loads(x) for x in via.letter_logprobs]
    for x, y in zip(a, s):
        assert set(x) == set(y) and np.allclose([x[k] for k in x], [y[k] for k in x], atol=1e-3)


def test_generation_modes_on_the_embedded_model(tmp_path):
    """grammar: always a valid 'Decision: X'; generate: SmolLM2 rarely writes one, so the answer is
    retried once with the format reminder and otherwise flagged invalid (and wrong)."""
    cfg = RunConfig(**{**GRID, "policies": ["ALL"], "variants": ["PSP"]})
    g = get_backend("llamacpp/smollm2-135m", decision_mode="grammar", reason_chars=60, cache=tmp_path / "c")
    dg = run_grid(cfg, g)
    assert not dg.invalid.any() and dg.decision_letter.isin(["A", "B", "C"]).all()
    gen = get_backend("llamacpp/smollm2-135m", decision_mode="generate", max_tokens=24, cache=tmp_path / "c")
    d = gen.decide([r for r, _ in build_requests(load_templates([ONE]), cfg, gen)])[0]
    assert (d.letter in ("A", "B", "C") and not d.invalid) or (d.invalid and d.meta["format_retry"] and d.option is None)


def test_relevance_filter_and_b3_summary_on_the_embedded_model(tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "--backend", "llamacpp/smollm2-135m", "--out", str(out), "--cache", str(tmp_path / "c"),
               "--templates", ONE, "--seeds", "0", "--variants", "PPP", "--budgets", "32t",
               "--policies", "R1-rel,B3", "--no-progress"])
    assert rc == 0
    df = read_results(out)
    rel = df[df.policy == "R1-rel"].iloc[0]
    assert rel.relevance_filter == "model"
    # PPP: 12 claims, 8 of them relevant (5 support + 3 decoy): recall is a count of 8, precision one of
    # at most 12 judged (or the filter's answer was unreadable and flagged)
    if not rel.relevance_invalid:
        assert 0 <= rel.relevance_recall <= 1 and (8 * rel.relevance_recall) == pytest.approx(round(8 * rel.relevance_recall))
        assert np.isnan(rel.relevance_precision) or any(
            (k * rel.relevance_precision) == pytest.approx(round(k * rel.relevance_precision)) for k in range(1, 13))
    b3 = df[df.policy == "B3"].iloc[0]
    assert b3.memory_tokens <= b3.budget_tokens == 32 and b3.memory_kind in ("summary", "empty")
