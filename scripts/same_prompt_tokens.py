"""Check that one decision prompt reaches vLLM as the same token ids over HTTP and in process, with one BOS.

    python scripts/same_prompt_tokens.py MODEL_FOLDER BASE_URL SERVED_NAME [ENGINE OPTIONS as KEY=VALUE ...]

``BASE_URL`` is a vLLM server of ``MODEL_FOLDER`` under ``SERVED_NAME``; the in-process engine (``vllm/MODEL_FOLDER``)
is started here with the options given (e.g. ``gpu_memory_utilization=0.4``). Compared for the first decision prompt
of the dev grid: chat generate mode, HTTP score mode (the server's template, ``continue_final_message``), HTTP score
mode with the suite rendering the folder's template (``hf:FOLDER``), and the engine's generate and score prompts. Exit
0 when they agree (the score prompt is the generate prompt plus the prefill) and no special token is doubled at the
start, else 1 with the first difference. ``scripts/gpu_smoke.sh`` runs it; ``tests/test_vllm_real.py`` checks the same
on the CPU build.
"""

from __future__ import annotations

import sys
import tempfile


def first_decision_messages() -> list[dict]:
    from crossprofile_lib import prompts as P
    from crossprofile_lib.backends import get_backend
    from crossprofile_lib.run.runner import RunConfig, build_requests
    from crossprofile_lib.task.templates import load_templates
    cfg = RunConfig(templates=["templates/dev/dev-hospital-01.yaml"], seeds=[0], budgets=["0.6"], policies=["R1"],
                    variants=["PSP"])
    req, _ = next(iter(build_requests(load_templates(cfg.templates), cfg, get_backend("ledger"))))
    return [P.decision_prompt(req.task, req.memory, req.option_order).message()]


def main(argv: list[str]) -> int:
    from crossprofile_lib.backends import get_backend
    from crossprofile_lib.backends.base import ChatRequest
    from crossprofile_lib.backends.chat_template import SCORE_PREFILL
    from crossprofile_lib.cli.args import option_value
    folder, url, name, *opts = argv
    engine_opts = {k: option_value(v) for k, _, v in (o.partition("=") for o in opts)}
    msgs, letters = first_decision_messages(), ("A", "B", "C")
    gen = ChatRequest(tuple(msgs), choices=letters)
    score = ChatRequest((*msgs, {"role": "assistant", "content": SCORE_PREFILL}), max_tokens=1, choices=letters)
    with tempfile.TemporaryDirectory() as cache:
        kw = dict(base_url=url, cache=cache, tokenizer="offline")
        ids = {"HTTP generate": get_backend(f"openai/{name}", decision_mode="generate", **kw).prompt_token_ids(gen),
               "HTTP score": get_backend(f"openai/{name}", decision_mode="score", **kw).prompt_token_ids(score),
               "HTTP score, hf: template": get_backend(f"openai/{name}", decision_mode="score",
                                                       chat_template=f"hf:{folder}", **kw).prompt_token_ids(score)}
        engine = get_backend(f"vllm/{folder}", cache=cache, **engine_opts)
        ids["in-process generate"] = engine.prompt_token_ids(gen)
        ids["in-process score"] = engine.prompt_token_ids(score)
    for k, v in ids.items():
        print(f"{k:26s} {len(v):5d} tokens, starting {v[:4]}")
    problems = []
    if ids["HTTP generate"] != ids["in-process generate"]:
        problems.append("generate: HTTP and in-process differ")
    if not ids["HTTP score"] == ids["HTTP score, hf: template"] == ids["in-process score"]:
        problems.append("score: the three paths differ")
    if ids["HTTP score"][:len(ids["HTTP generate"])] != ids["HTTP generate"]:
        problems.append("the score prompt is not the generate prompt plus the prefill")
    problems += [f"{k}: the first token is doubled ({v[:2]})" for k, v in ids.items() if len(v) > 1 and v[0] == v[1]]
    for p in problems:
        print("error:", p)
    print("same prompt tokens on every path" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) < 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
