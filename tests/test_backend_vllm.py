"""The in-process vLLM adapter against a fake ``vllm`` module with the same interface (the real engine, the CPU build:
``tests/test_vllm_real.py``; a GPU: ``scripts/gpu_smoke.sh``).
"""

import re
import sys
import types
from dataclasses import dataclass, field

import pytest

from crossprofile_lib.backends import get_backend
from crossprofile_lib.run.runner import RunConfig, run_grid

GRID = dict(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"],
            policies=["R1", "ALL", "R1-rel"], variants=["PSP", "SPS"])


class FakeTokenizer:
    """Pieces (a special token, a word with its leading space, a space) numbered as first seen; ``encode`` adds a BOS
    (id 0) unless told not to, as Llama-3's tokenizer does."""

    PIECE = re.compile(r"<\|\w+\|>| ?[^\s<]+|\s")

    def __init__(self):
        self.vocab = {"<|bos|>": 0}

    def encode(self, text, add_special_tokens=True):
        ids = [self.vocab.setdefault(p, len(self.vocab)) for p in self.PIECE.findall(text)]
        return ([0] if add_special_tokens else []) + ids

    def decode(self, ids):
        back = {i: p for p, i in self.vocab.items()}
        return "".join(back[i] for i in ids)

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, continue_final_message=False):
        last = messages[-1] if continue_final_message else None
        body = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in (messages[:-1] if last else messages))
        if last:
            return body + f"<|{last['role']}|>{last['content']}"
        return body + ("<|assistant|>" if add_generation_prompt else "")


@dataclass
class Logprob:
    logprob: float
    rank: int
    decoded_token: str


@dataclass
class Completion:
    text: str
    token_ids: list
    logprobs: list = None


@dataclass
class RequestOutput:
    prompt: str
    prompt_token_ids: list
    outputs: list = field(default_factory=list)


def make_fake_vllm():
    mod = types.ModuleType("vllm")
    sp_mod = types.ModuleType("vllm.sampling_params")

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class StructuredOutputsParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        instances = []

        def __init__(self, **kw):
            self.kw, self.calls, self.tok = kw, [], FakeTokenizer()
            LLM.instances.append(self)

        def get_tokenizer(self):
            return self.tok

        def generate(self, prompts, sampling_params, use_tqdm=True):
            texts = [self.tok.decode(p["prompt_token_ids"]) for p in prompts]
            self.calls.append((texts, list(sampling_params), [list(p["prompt_token_ids"]) for p in prompts]))
            outs = []
            for p, t, sp in zip(prompts, texts, sampling_params):
                if getattr(sp, "logprob_token_ids", None):  # every named token's log-probability: B first
                    lp = {" B": -0.3, " A": -1.5, " C": -2.0, "A": -4.0, "B": -5.0, "C": -6.0}
                    back = {i: w for w, i in self.tok.vocab.items()}
                    lps = {i: Logprob(lp[back[i]], 0, back[i]) for i in sp.logprob_token_ids}
                    c = Completion(" B", [self.tok.vocab[" B"]], [lps])
                elif '"relevant"' in t:
                    c = Completion('{"relevant": [1, 2, 3]}', [5, 6])
                else:
                    c = Completion("Because of the notes.\nDecision: C", [7, 8, 9])
                outs.append(RequestOutput(t, list(p["prompt_token_ids"]), [c]))
            return outs

    mod.LLM, mod.SamplingParams, mod.sampling_params = LLM, SamplingParams, sp_mod
    sp_mod.StructuredOutputsParams = StructuredOutputsParams
    return mod


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = make_fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", mod.sampling_params)
    return mod


def test_one_batched_generate_call_with_prefix_caching_and_parallelism(fake_vllm, tmp_path):
    b = get_backend("vllm//models/qwen2.5-7b-instruct", cache=tmp_path, tensor_parallel_size=2,
                    distributed_executor_backend="ray")
    eng = fake_vllm.LLM.instances[-1]
    assert eng.kw["model"] == "/models/qwen2.5-7b-instruct" and eng.kw["enable_prefix_caching"] is True
    assert eng.kw["tensor_parallel_size"] == 2 and eng.kw["distributed_executor_backend"] == "ray"
    assert eng.kw["max_model_len"] == 8192 and eng.kw["dtype"] == "float16"
    assert b.tokenizer.name == "vllm:qwen2.5-7b-instruct"
    df = run_grid(RunConfig(**GRID), b)
    assert (df.error == "").all() and (df.decision_letter == "C").all() and (df.backend.str.startswith("vllm/")).all()
    # relevance calls were prefetched in one batch, then every decision went out in one call
    assert len(eng.calls) == 2
    prompts, params, ids = eng.calls[1]
    assert len(prompts) == len(set(df.prompt_sha)) and all(p.endswith("<|assistant|>") for p in prompts)
    assert all(sp.temperature == 0.0 and sp.max_tokens == 512 for sp in params)
    # token ids, the template's own special tokens and no BOS added (a text prompt would get one: Llama-3 doubled it)
    assert all(i[0] != 0 and i == eng.tok.encode(p, add_special_tokens=False) for p, i in zip(prompts, ids))
    rerun = get_backend("vllm//models/qwen2.5-7b-instruct", cache=tmp_path)
    run_grid(RunConfig(**GRID), rerun)
    assert fake_vllm.LLM.instances[-1].calls == [] and rerun.stats["calls"] == 0


def test_score_mode_reads_letter_logprobs_after_the_prefill(fake_vllm, tmp_path):
    b = get_backend("vllm//models/m", decision_mode="score", cache=tmp_path)
    df = run_grid(RunConfig(**{**GRID, "policies": ["ALL"]}), b)
    assert (df.decision_letter == "B").all() and not df.invalid.any()
    eng = fake_vllm.LLM.instances[-1]
    prompts, params, _ = eng.calls[-1]
    assert all(p.endswith("<|assistant|>Decision:") for p in prompts)  # the prefill continued, no end-of-turn
    # every letter's own log-probability, bare and after a space (the larger counts), none left to a top-k
    want = sorted(eng.tok.vocab[w] for w in ("A", " A", "B", " B", "C", " C"))
    assert all(sp.max_tokens == 1 and sorted(sp.logprob_token_ids) == want and sp.logprobs == len(want) for sp in params)
    assert (df.letter_logprobs == '{"A": -1.5, "B": -0.3, "C": -2.0}').all() and (df.letters_missing == "").all()


def test_grammar_mode_uses_structured_outputs(fake_vllm, tmp_path):
    b = get_backend("vllm//models/m", decision_mode="grammar", cache=tmp_path)
    run_grid(RunConfig(**GRID), b)
    calls = fake_vllm.LLM.instances[-1].calls
    rel_params, dec_params = calls[0][1], calls[1][1]
    assert all(sp.structured_outputs.kw["json"]["properties"]["relevant"] for sp in rel_params)
    assert all(sp.structured_outputs.kw["regex"].endswith("\\nDecision: (A|B|C)") for sp in dec_params)


def test_engine_failure_becomes_errors_and_missing_vllm_is_a_clear_error(fake_vllm, tmp_path, monkeypatch):
    b = get_backend("vllm//models/m", cache=tmp_path)
    monkeypatch.setattr(fake_vllm.LLM.instances[-1], "generate", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("CUDA out of memory")))
    df = run_grid(RunConfig(**{**GRID, "policies": ["ALL"]}), b)
    assert df.error.str.contains("CUDA out of memory").all()
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ValueError, match="vLLM is not installed"):
        get_backend("vllm//models/m", cache=tmp_path)
