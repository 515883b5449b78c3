"""One llama.cpp engine on given prompts, in its own interpreter (issue 26.1; run by
``check_prebuilt_engine.py --measure``, one throw-away virtualenv per candidate, because several
candidates install a module named ``llama_cpp``).

Imports nothing of crossprofile: only the engine and numpy. Reads a JSON job
``{"gguf": path, "prompts": [text, ...], "letters": {"A": [token ids], ...}, "threads": 1}``
and writes, for each prompt, the token ids the engine's tokenizer gives (as the suite tokenizes a
text prompt: BOS as the model's metadata says, special tokens parsed), the decision-letter
log-probabilities at the last position (``max over the letter's token ids of logit - logsumexp``,
over the whole vocabulary), the prompt-evaluation seconds (a fresh evaluation, no reused prefix),
plus what the engine offers for ``grammar`` mode and the chat template.

    python benchmarks/prebuilt_engine_probe.py ENGINE JOB.json OUT.json

ENGINE: ``llama_cpp`` (llama-cpp-python or a wheel that installs the same module), ``xllamacpp``
(llama.cpp's server in-process, its defaults: flash attention ``auto``), ``xllamacpp-noflash``
(flash attention off, as llama-cpp-python's default). Prompt-evaluation time: the fastest of the
timed passes of each prompt (llama_cpp: ``reps``, default 2; xllamacpp: its text and token-id passes).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def _letters(logits: np.ndarray, letters: dict) -> dict:
    z = logits.astype(np.float64)
    top = z.max()
    logz = top + np.log(np.exp(z - top).sum())
    return {c: float(z[ids].max() - logz) for c, ids in letters.items() if ids}


def probe_llama_cpp(job: dict) -> dict:
    import llama_cpp
    from llama_cpp import Llama, LlamaGrammar
    ll = Llama(model_path=job["gguf"], n_ctx=2048, n_batch=512, n_threads=job["threads"],
               n_threads_batch=job["threads"], logits_all=False, seed=0, verbose=False)
    out = {"engine_version": llama_cpp.__version__, "prompts": []}

    def run(toks):
        ll.reset()
        t0 = time.perf_counter()
        ll.eval(toks)
        dt = time.perf_counter() - t0
        return _letters(np.ctypeslib.as_array(ll._ctx.get_logits(), shape=(ll.n_vocab(),)), job["letters"]), dt
    refs = job.get("reference_tokens") or [None] * len(job["prompts"])
    for p, ref in zip(job["prompts"], refs):
        toks = ll.tokenize(p.encode("utf-8"), add_bos=True, special=True)
        runs = [run(toks) for _ in range(job.get("reps", 2))]
        row = {"tokens": toks, "letter_logprobs": runs[0][0], "eval_s": min(dt for _, dt in runs),
               "repeatable": all(r[0] == runs[0][0] for r in runs)}
        if ref is not None:
            row["letter_logprobs_reference_tokens"] = runs[0][0] if ref == toks else run(ref)[0]
        out["prompts"].append(row)
    try:
        g = LlamaGrammar.from_string('root ::= "Decision: " [A-D]', verbose=False)
        r = ll.create_completion(job["prompts"][0], max_tokens=8, temperature=0.0, grammar=g, seed=0)
        out["grammar"] = {"supported": True, "sample": r["choices"][0]["text"]}
    except Exception as e:  # noqa: BLE001 - what the engine says is the finding
        out["grammar"] = {"supported": False, "error": f"{type(e).__name__}: {e}"[:300]}
    out["chat_template"] = (ll.metadata or {}).get("tokenizer.chat_template")
    return out


def probe_xllamacpp(job: dict, flash_attn: str = "AUTO") -> dict:
    """xllamacpp: llama.cpp's server in-process (``Server.handle_completions`` takes the HTTP
    server's JSON). Its log-probabilities are the server's top ``n_probs`` of the next token
    (pre-sampling), so a letter outside the top ``n_probs`` has none."""
    import xllamacpp as x
    p = x.CommonParams()
    p.model.path = job["gguf"]
    p.n_ctx = 2048
    p.n_batch = 512
    p.n_parallel = 1
    p.cpuparams.n_threads = job["threads"]
    p.cpuparams_batch.n_threads = job["threads"]
    p.cache_prompt = False
    p.flash_attn_type = getattr(x.llama_flash_attn_type, f"LLAMA_FLASH_ATTN_TYPE_{flash_attn}")
    srv = x.Server(p)
    inv = {i: c for c, ids in job["letters"].items() for i in ids}
    out = {"engine_version": x.__version__, "flash_attn": flash_attn, "prompts": []}
    n_probs = 100

    def ask(prompt):
        r = srv.handle_completions({"prompt": prompt, "n_predict": 1, "temperature": 0.0, "n_probs": n_probs,
                                    "post_sampling_probs": False, "cache_prompt": False})
        r = json.loads(r) if isinstance(r, str) else r
        lps: dict = {}
        for e in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
            c = inv.get(e["id"])
            if c is not None and (c not in lps or e["logprob"] > lps[c]):
                lps[c] = e["logprob"]
        return r, lps
    for k, text in enumerate(job["prompts"]):
        r, lps = ask(text)
        secs = [r["timings"]["prompt_ms"] / 1000.0]
        row = {"tokens": None, "n_prompt_tokens": r["usage"]["prompt_tokens"], "letter_logprobs": lps,
               "top_n": n_probs}
        if job.get("reference_tokens"):  # the same ids as the reference evaluated: a second timed pass
            r2, row["letter_logprobs_reference_tokens"] = ask(job["reference_tokens"][k])
            secs.append(r2["timings"]["prompt_ms"] / 1000.0)
            row["repeatable"] = row["letter_logprobs_reference_tokens"] == lps
        row["eval_s"] = min(secs)
        out["prompts"].append(row)
    try:
        r = srv.handle_completions({"prompt": job["prompts"][0], "n_predict": 8, "temperature": 0.0,
                                    "grammar": 'root ::= "Decision: " [A-D]'})
        r = json.loads(r) if isinstance(r, str) else r
        out["grammar"] = {"supported": True, "sample": r["choices"][0]["text"]}
    except Exception as e:  # noqa: BLE001
        out["grammar"] = {"supported": False, "error": f"{type(e).__name__}: {e}"[:300]}
    out["chat_template"] = "in-process llama-server: handle_chat_completions applies the GGUF's template"
    out["tokenize"] = "no tokenize call in the Python API (the server's /tokenize is not exposed)"
    return out


ENGINES = {"llama_cpp": probe_llama_cpp, "xllamacpp": probe_xllamacpp,
           "xllamacpp-noflash": lambda job: probe_xllamacpp(job, "DISABLED")}


def main(argv=None) -> int:
    engine, job_path, out_path = (argv or sys.argv[1:])[:3]
    job = json.loads(open(job_path).read())
    t0 = time.perf_counter()
    try:
        res = ENGINES[engine](job)
        res["ok"] = True
    except Exception as e:  # noqa: BLE001 - a load or API failure is the finding
        res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    res["wall_s"] = time.perf_counter() - t0
    with open(out_path, "w") as fh:
        json.dump(res, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
