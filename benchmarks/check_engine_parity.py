"""Does the prebuilt engine decide exactly as llama-cpp-python? (issue 36.1)

Runs the embedded backend ``llamacpp/smollm2-135m`` once per engine (``engine=cyllama`` and
``engine=llama-cpp-python``, each in its own interpreter, one thread) on the same requests, through the
backend's own batch path (prompts sorted by text, so the key/value cache prefix reuse is exercised):

* score mode: every distinct decision prompt of the dev templates x R1/B4/ALL/EMPTY x PSP/SPS/PPP, seed
  0, r = .6: the token ids, the letter log-probabilities (compared exactly: the largest absolute
  difference) and the letter picked;
* grammar mode (``reason_chars`` 80) and generate mode (``max_tokens`` 40) on the first prompts: the
  text and the token counts;
* JSON-schema answers (the relevance filter's schema, in grammar mode): the text;
* every vocabulary token's bytes (what the letter tokens and the generated text are built from; those
  longer than 32 bytes are counted apart: llama-cpp-python 0.3.36 returns them empty);

and, in this interpreter, whether the GBNF text of the suite's JSON schemas is the same from
llama-cpp-python's converter and cyllama's (each engine uses its own; they differ in the blanks they
allow, so the JSON-schema answers above are today's path against the new default path).

    python benchmarks/check_engine_parity.py [--score-prompts N] [--gen-prompts N]

Needs both engines installed (``make install-llm`` and ``pip install llama-cpp-python``). Writes
``benchmarks/results/engine_parity.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from record import Recorder  # noqa: E402

ENGINES = ("cyllama", "llama-cpp-python")


def _requests(backend):
    from crossprofile_lib.run.runner import RunConfig, build_requests
    from crossprofile_lib.task.templates import load_templates
    cfg = RunConfig(templates=["templates/dev"], seeds=[0], budgets=["0.6"], policies=["R1", "B4", "ALL", "EMPTY"],
                    variants=["PSP", "SPS", "PPP"])
    out, seen = [], set()
    for r, _ in build_requests(load_templates(cfg.templates), cfg, backend):
        c = backend._decision_request(r)
        key = json.dumps(c.messages, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _run(backend, reqs) -> list[dict]:
    rows: dict[int, dict] = {}

    def done(i, res):
        rows[i] = {"text": res.text, "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                   "letter_logprobs": res.choice_logprobs, "error": res.error}
    backend._complete(reqs, done)
    return [rows[i] for i in range(len(reqs))]


def worker(engine: str, out: Path, n_score: int, n_gen: int) -> None:
    import dataclasses

    from crossprofile_lib.backends import get_backend
    from crossprofile_lib.backends.llm import relevance_schema
    t0 = time.perf_counter()
    res: dict = {"engine": engine}
    b = get_backend("llamacpp/smollm2-135m", engine=engine, n_threads=1, cache=":memory:")
    res["engine_version"] = f"{b.engine.name} {b.engine.version}"
    reqs = _requests(b)[:n_score]
    res["tokens"] = [b._tokens(b.template.render(r.messages)) for r in reqs]
    res["score"] = _run(b, reqs)
    res["pieces"] = [b.engine.piece(i).hex() for i in range(b.engine.n_vocab())]
    g = get_backend("llamacpp/smollm2-135m", engine=engine, n_threads=1, cache=":memory:", decision_mode="grammar",
                    reason_chars=80)
    res["grammar"] = _run(g, reqs[:n_gen])
    js = [dataclasses.replace(r, choices=None, json_schema=relevance_schema(6), max_tokens=40) for r in reqs[:n_gen]]
    res["json_schema"] = _run(g, js)
    gen = get_backend("llamacpp/smollm2-135m", engine=engine, n_threads=1, cache=":memory:", decision_mode="generate")
    res["generate"] = _run(gen, [dataclasses.replace(r, max_tokens=40) for r in reqs[:n_gen]])
    res["seconds"] = round(time.perf_counter() - t0, 1)
    out.write_text(json.dumps(res))


def _grammars() -> dict:
    """The suite's JSON schemas as GBNF by both converters."""
    from cyllama.utils.json_schema_to_grammar import json_schema_to_grammar
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from crossprofile_lib.backends.llm import relevance_schema, stance_schema
    from crossprofile_lib.hiddenbench.natural import vote_schema
    schemas = {"relevance_schema(12)": relevance_schema(12), "stance_schema(12, ABC)": stance_schema(12, "ABC"),
               "vote_schema(ABC)": vote_schema("ABC")}
    same = {k: json_schema_to_gbnf(json.dumps(s)) == json_schema_to_grammar(s) for k, s in schemas.items()}
    return {"same_gbnf_text": same, "all_same": all(same.values())}


def _pieces(cy: list[str], ref: list[str]) -> dict:
    """Token bytes; llama-cpp-python 0.3.36 reads each piece into a 32-byte buffer and returns b'' for a longer one."""
    differ = [i for i, (x, y) in enumerate(zip(cy, ref)) if x != y]
    long_ = [i for i in differ if ref[i] == "" and len(bytes.fromhex(cy[i])) > 32]
    return {"tokens": len(cy), "same": len(cy) - len(differ), "differ_only_as_longer_than_32_bytes": len(long_),
            "other_differences": [i for i in differ if i not in long_][:20]}


def compare(a: dict, b: dict) -> dict:
    sa, sb = a["score"], b["score"]
    diffs = [abs(x["letter_logprobs"][k] - y["letter_logprobs"][k]) for x, y in zip(sa, sb)
             for k in x["letter_logprobs"]]
    same_keys = all(set(x["letter_logprobs"]) == set(y["letter_logprobs"]) for x, y in zip(sa, sb))

    def pick(lp):
        return max(lp, key=lp.get) if lp else None
    out = {"score": {"prompts": len(sa), "letters_compared": len(diffs), "same_letter_sets": same_keys,
                     "max_abs_diff": max(diffs) if diffs else None,
                     "exactly_equal": same_keys and all(d == 0.0 for d in diffs),
                     "same_decision": sum(pick(x["letter_logprobs"]) == pick(y["letter_logprobs"]) for x, y in zip(sa, sb)),
                     "same_token_ids": sum(x == y for x, y in zip(a["tokens"], b["tokens"])),
                     "prompt_tokens": [len(t) for t in a["tokens"]]},
           "pieces": _pieces(a["pieces"], b["pieces"])}
    for mode in ("grammar", "json_schema", "generate"):
        xa, xb = a[mode], b[mode]
        out[mode] = {"prompts": len(xa), "same_text": sum(x["text"] == y["text"] for x, y in zip(xa, xb)),
                     "same_token_counts": sum((x["prompt_tokens"], x["completion_tokens"])
                                              == (y["prompt_tokens"], y["completion_tokens"]) for x, y in zip(xa, xb)),
                     "errors": [x["error"] for x in xa + xb if x["error"]],
                     "texts": [[x["text"], y["text"]] for x, y in zip(xa, xb) if x["text"] != y["text"]][:5],
                     "sample": xa[0]["text"][:160] if xa else None}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--score-prompts", type=int, default=1000, help="at most this many score-mode prompts")
    ap.add_argument("--gen-prompts", type=int, default=4, help="prompts for grammar, JSON-schema and generate modes")
    ap.add_argument("--worker", nargs=2, metavar=("ENGINE", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/engine_parity.json")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker[0], Path(a.worker[1]), a.score_prompts, a.gen_prompts)
        return 0
    rec = Recorder()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for e in ENGINES:
            f = Path(tmp) / f"{e}.json"
            subprocess.run([sys.executable, __file__, "--worker", e, str(f), "--score-prompts", str(a.score_prompts),
                            "--gen-prompts", str(a.gen_prompts)], check=True, cwd=ROOT)
            runs[e] = json.loads(f.read_text())
    res = compare(runs["cyllama"], runs["llama-cpp-python"])
    res["engines"] = {e: {"version": r["engine_version"], "seconds": r["seconds"]} for e, r in runs.items()}
    res["gbnf"] = _grammars()
    res["verdict"] = ("identical" if res["score"]["exactly_equal"] and not res["pieces"]["other_differences"]
                      and all(res[m]["same_text"] == res[m]["prompts"] for m in ("grammar", "json_schema", "generate"))
                      else "different")
    rec.write(a.out, {"threads": 1, "model": "llamacpp/smollm2-135m", **res})
    print(json.dumps({k: v for k, v in res.items()}, indent=1)[:4000])
    return 0 if res["verdict"] == "identical" else 1


if __name__ == "__main__":
    sys.exit(main())
