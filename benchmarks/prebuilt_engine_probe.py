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
(flash attention off, as llama-cpp-python's default), ``llama_cpp_cffi`` (llama-cpp-cffi's CPU
extension, llama.cpp's C API through CFFI), ``cyllama`` (cyllama's Cython classes) and
``ik_llama_cpp`` (ik-llama-cpp-python's ctypes bindings of the ik_llama.cpp fork). The last three
are driven as llama-cpp-python drives llama.cpp in the reference: n_ctx 2048, n_batch = n_ubatch
512, flash attention off, one batch of the whole prompt with only the last position's logits.
Prompt-evaluation time: the fastest of the timed passes of each prompt (``reps``, default 2;
xllamacpp: its text and token-id passes).
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
    if hasattr(llama_cpp, "llama_print_system_info"):
        out["system_info"] = llama_cpp.llama_print_system_info().decode()

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


def _scores(job: dict, tokenize, evaluate) -> list[dict]:
    """The rows of one engine: ``tokenize(text) -> ids`` as the suite tokenizes (BOS per the
    model's metadata, special tokens parsed); ``evaluate(ids) -> (logits of the last position,
    seconds)`` from an empty KV cache."""
    rows = []
    refs = job.get("reference_tokens") or [None] * len(job["prompts"])
    for p, ref in zip(job["prompts"], refs):
        toks = [int(t) for t in tokenize(p)]
        runs = []
        for _ in range(job.get("reps", 2)):
            logits, dt = evaluate(toks)
            runs.append((_letters(logits, job["letters"]), dt))
        row = {"tokens": toks, "letter_logprobs": runs[0][0], "eval_s": min(dt for _, dt in runs),
               "repeatable": all(r[0] == runs[0][0] for r in runs)}
        if ref is not None:
            row["letter_logprobs_reference_tokens"] = runs[0][0] if ref == toks else _letters(
                evaluate(ref)[0], job["letters"])
        rows.append(row)
    return rows


def probe_llama_cpp_cffi(job: dict) -> dict:
    """llama-cpp-cffi: its CPU extension (``llama/_llama_cpp_cpu``: ``lib`` = llama.cpp's C API,
    ``ffi``) loaded by file, because the package's ``__init__`` imports transformers and
    huggingface_hub (not installed: nothing here may reach a model hub). The C API of the release
    at hand: the older or newer name of each call (llama.cpp renamed several during 2024-25)."""
    import importlib.metadata
    import importlib.util
    from pathlib import Path
    spec = importlib.util.find_spec("llama")  # locates the package without importing it
    pkg = Path(spec.submodule_search_locations[0])
    so = next(pkg.glob("_llama_cpp_cpu*.so"), None)
    if so is None:
        cli = sorted(p.name for p in pkg.glob("_llama_cli_cpu*.so"))
        raise NotImplementedError(f"no C API: the CPU extension {cli} exports only _llama_cli_main (llama-cli's "
                                  "main, streaming generated text): no tokenize, no logits" if cli else
                                  "no _llama_cpp_cpu extension in the package")
    ext = importlib.util.spec_from_file_location("_llama_cpp_cpu", so)
    mod = importlib.util.module_from_spec(ext)
    ext.loader.exec_module(mod)
    lib, ffi = mod.lib, mod.ffi
    have = lambda n: hasattr(lib, n)  # noqa: E731
    call = lambda *names: getattr(lib, next(n for n in names if have(n)))  # noqa: E731
    lib.llama_backend_init()
    mp = lib.llama_model_default_params()
    model = call("llama_model_load_from_file", "llama_load_model_from_file")(job["gguf"].encode(), mp)
    if model == ffi.NULL:
        raise RuntimeError("the model did not load")
    vocab = lib.llama_model_get_vocab(model) if have("llama_model_get_vocab") else model
    n_vocab = lib.llama_vocab_n_tokens(vocab) if have("llama_vocab_n_tokens") else lib.llama_n_vocab(model)
    cp = lib.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 2048, 512, 512
    cp.n_threads = cp.n_threads_batch = job["threads"]
    fields = {f for f, _ in ffi.typeof("struct llama_context_params").fields}
    if "flash_attn_type" in fields:
        cp.flash_attn_type = 0  # LLAMA_FLASH_ATTN_TYPE_DISABLED
    elif "flash_attn" in fields:
        cp.flash_attn = False
    ctx = call("llama_init_from_model", "llama_new_context_with_model")(model, cp)
    if ctx == ffi.NULL:
        raise RuntimeError("no context")

    def clear():
        if have("llama_memory_clear"):
            lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
        else:
            call("llama_kv_self_clear", "llama_kv_cache_clear")(ctx)

    def tokenize(text):
        b = text.encode("utf-8")
        buf = ffi.new("llama_token[]", len(b) + 16)
        n = lib.llama_tokenize(vocab, b, len(b), buf, len(b) + 16, True, True)
        if n < 0:
            raise RuntimeError("tokenize failed")
        return list(buf[0:n])

    def decode(toks, logits_last=True):
        batch = lib.llama_batch_init(len(toks), 0, 1)
        batch.n_tokens = len(toks)
        for i, t in enumerate(toks):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if (logits_last and i == len(toks) - 1) else 0
        t0 = time.perf_counter()
        rc = lib.llama_decode(ctx, batch)
        dt = time.perf_counter() - t0
        lib.llama_batch_free(batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return dt

    def evaluate(toks):
        clear()
        dt = decode(toks)
        ptr = lib.llama_get_logits_ith(ctx, len(toks) - 1)
        return np.frombuffer(ffi.buffer(ptr, 4 * n_vocab), dtype=np.float32).copy(), dt
    out = {"engine_version": importlib.metadata.version("llama-cpp-cffi"),
           "system_info": ffi.string(lib.llama_print_system_info()).decode(),
           "prompts": _scores(job, tokenize, evaluate),
           "tokenize": "lib.llama_tokenize (C API through CFFI; no Python wrapper)"}
    try:
        if not have("llama_sampler_init_grammar"):
            raise NotImplementedError("no llama_sampler_init_grammar: this llama.cpp's grammar API takes "
                                      "pre-parsed rules (llama_grammar_init), no GBNF text")
        args = (vocab,) if have("llama_model_get_vocab") else (model,)
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_grammar(
            *args, b'root ::= "Decision: " [A-D]', b"root"))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        toks, text = tokenize(job["prompts"][0]), b""
        clear()
        decode(toks)
        pos = len(toks)
        for _ in range(8):
            t = lib.llama_sampler_sample(chain, ctx, -1)
            if (lib.llama_vocab_is_eog(vocab, t) if have("llama_vocab_is_eog") else lib.llama_token_is_eog(model, t)):
                break
            piece = ffi.new("char[]", 64)
            n = lib.llama_token_to_piece(vocab, t, piece, 64, 0, True)
            text += ffi.buffer(piece, n)[:]
            batch = lib.llama_batch_init(1, 0, 1)
            batch.n_tokens, batch.token[0], batch.pos[0], batch.n_seq_id[0] = 1, t, pos, 1
            batch.seq_id[0][0], batch.logits[0] = 0, 1
            lib.llama_decode(ctx, batch)
            lib.llama_batch_free(batch)
            pos += 1
        out["grammar"] = {"supported": True, "sample": text.decode("utf-8", "replace"),
                          "via": "lib.llama_sampler_init_grammar (C API; no Python wrapper)"}
    except Exception as e:  # noqa: BLE001
        out["grammar"] = {"supported": False, "error": f"{type(e).__name__}: {e}"[:300]}
    buf = ffi.new("char[]", 65536)
    n = lib.llama_model_meta_val_str(model, b"tokenizer.chat_template", buf, 65536)
    out["chat_template"] = ffi.string(buf).decode() if n > 0 else None
    return out


def probe_cyllama(job: dict) -> dict:
    """cyllama: its Cython classes over llama.cpp (``cyllama.llama.llama_cpp``)."""
    import cyllama
    from cyllama.llama import llama_cpp as cy
    cy.disable_logging()
    class Model(cy.LlamaModel):
        """cyllama 0.2.18's LlamaContext.get_logits/get_logits_ith ask the model for ``n_vocab``,
        which only its LlamaVocab has (AttributeError without this)."""
        @property
        def n_vocab(self):
            return self.get_vocab().n_vocab
    model = Model(job["gguf"], cy.LlamaModelParams())
    vocab = model.get_vocab()
    n_vocab = vocab.n_vocab
    cp = cy.LlamaContextParams()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 2048, 512, 512
    cp.n_threads = cp.n_threads_batch = job["threads"]
    cp.flash_attn_type = 0  # LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = cy.LlamaContext(model, cp)

    def evaluate(toks):
        ctx.kv_cache_clear()
        batch = cy.llama_batch_get_one(toks, 0)  # logits of the last position only
        t0 = time.perf_counter()
        ctx.decode(batch)
        dt = time.perf_counter() - t0
        return np.asarray(ctx.get_logits_ith(-1), dtype=np.float32)[:n_vocab], dt
    out = {"engine_version": cyllama.__version__, "llama_cpp_build": cy.ggml_commit(),
           "prompts": _scores(job, lambda p: vocab.tokenize(p, add_special=True, parse_special=True), evaluate),
           "tokenize": "LlamaVocab.tokenize"}
    try:
        sp = cy.LlamaSampler(cy.LlamaSamplerChainParams())
        sp.add_grammar(vocab, 'root ::= "Decision: " [A-D]', "root")
        sp.add_greedy()
        toks = vocab.tokenize(job["prompts"][0], add_special=True, parse_special=True)
        ctx.kv_cache_clear()
        ctx.decode(cy.llama_batch_get_one(toks, 0))
        pos, text = len(toks), ""
        for _ in range(8):
            t = sp.sample(ctx, -1)
            if vocab.is_eog(t):
                break
            text += vocab.token_to_piece(t, 0, True)
            ctx.decode(cy.llama_batch_get_one([t], pos))
            pos += 1
        out["grammar"] = {"supported": True, "sample": text, "via": "LlamaSampler.add_grammar"}
    except Exception as e:  # noqa: BLE001
        out["grammar"] = {"supported": False, "error": f"{type(e).__name__}: {e}"[:300]}
    out["chat_template"] = model.meta_val_str("tokenizer.chat_template")
    return out


def probe_ik_llama_cpp(job: dict) -> dict:
    """ik-llama-cpp-python: its ctypes bindings (``ik_llama_cpp._ctypes_api``) of the ik_llama.cpp
    fork; its high-level ``IkLlama`` has no score call, grammar or GGUF chat template."""
    import ctypes

    import ik_llama_cpp
    import ik_llama_cpp._ctypes_api as C
    from ik_llama_cpp._internals import make_batch
    C.llama_backend_init()
    model = C.llama_model_load_from_file(job["gguf"].encode(), C.llama_model_default_params())
    if not model:
        raise RuntimeError("the model did not load")
    vocab = C.llama_model_get_vocab(model)
    n_vocab = C.llama_vocab_n_tokens(vocab)
    cp = C.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 2048, 512, 512
    cp.n_threads = cp.n_threads_batch = job["threads"]
    cp.flash_attn = False
    ctx = C.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError("no context")

    def tokenize(text):
        b = text.encode("utf-8")
        buf = (C.llama_token * (len(b) + 16))()
        n = C.llama_tokenize(model, b, len(b), buf, len(b) + 16, True, True)  # the fork takes model*
        if n < 0:
            raise RuntimeError("tokenize failed")
        return list(buf[:n])

    def evaluate(toks):
        C.llama_kv_cache_clear(ctx)
        batch = make_batch(toks, logits_last=True)
        t0 = time.perf_counter()
        rc = C.llama_decode(ctx, batch)
        dt = time.perf_counter() - t0
        C.llama_batch_free(batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return np.ctypeslib.as_array(C.llama_get_logits_ith(ctx, len(toks) - 1), shape=(n_vocab,)).copy(), dt
    lib = C._lib
    info = lib.llama_print_system_info
    info.restype = ctypes.c_char_p
    meta = lib.llama_model_meta_val_str
    meta.argtypes, meta.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int32
    buf = ctypes.create_string_buffer(65536)
    n = meta(model, b"tokenizer.chat_template", buf, 65536)
    return {"engine_version": ik_llama_cpp.__version__, "system_info": info().decode(),
            "prompts": _scores(job, tokenize, evaluate),
            "tokenize": "llama_tokenize (the package's ctypes binding)",
            "grammar": {"supported": False, "error": "no grammar in the Python API (IkLlama.generate samples "
                        "top-k/top-p/temperature only; _ctypes_api binds no grammar call; the library "
                        "exports llama_sample_grammar / llama_sampler_init_grammar without a binding)"},
            "chat_template": buf.value.decode() if n > 0 else None,
            "chat_template_note": "IkLlama.create_chat_completion applies a hard-coded Gemma-style template, "
                                  "not the GGUF's"}


ENGINES = {"llama_cpp": probe_llama_cpp, "xllamacpp": probe_xllamacpp,
           "xllamacpp-noflash": lambda job: probe_xllamacpp(job, "DISABLED"),
           "llama_cpp_cffi": probe_llama_cpp_cffi, "cyllama": probe_cyllama, "ik_llama_cpp": probe_ik_llama_cpp}


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
