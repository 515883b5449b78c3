"""A broad trial of bad command lines, bad files and faults (issue 23): every case a real process.

Each case runs ``crossprofile`` (``python -m crossprofile_lib.cli``) in its own folder, against real
files (hostile templates, HiddenBench files, prereg files, chat-template and tokenizer files, run
folders, call caches), a real local fake OpenAI-compatible server with injected faults
(``tests/fake_openai_server.py``: 5xx, 429 with ``Retry-After``, empty answers, connection resets,
malformed bodies, timeouts, 401, a closed port), a file-size limit (``RLIMIT_FSIZE``: writes fail
with ``EFBIG``) and, when this process may mount (root), a full and a read-only tmpfs. A case fails
the trial when

* the process prints a **traceback** or an ``internal error``;
* it does not finish within its time limit (a **hang**);
* its exit status is not the expected one (a refusal is exit 1 or 2 with a message; a tolerated
  fault is exit 0);
* it changes or removes a file that existed before it ran (**lost work**), or a refused command
  leaves its output folder behind;
* it exits 0 with a **poisoned** result: an error row, an invalid decision where the fake server
  always answers validly, or a blank answer in the call cache;
* a **key** appears in any file under the case's folder (lock files, run headers, results, caches,
  exports) or in its output: every server case runs with canary keys in ``CROSSPROFILE_API_KEY``,
  in the base URL's userinfo and in a ``?code=`` query, and as ``--backend-option api_key=``.

Run from the repository root::

    python benchmarks/bad_input_trial.py [--jobs 3] [--only SUBSTRING] [--out benchmarks/results/bad_input_trial.json]

It prints one line per failing case and the summary, and writes the report (commit, command, counts
per group, every failure) to ``--out``.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from record import Recorder  # benchmarks/ is the script's folder

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CLI = [PY, "-m", "crossprofile_lib.cli"]
SERVER = ROOT / "tests" / "fake_openai_server.py"
TPL = ROOT / "templates" / "dev" / "dev-hospital-01.yaml"
TPL2 = ROOT / "templates" / "dev" / "dev-bus-route-01.yaml"
BROKEN = ROOT / "tests" / "broken_templates"
FIXTURE = ROOT / "crossprofile_lib" / "resources" / "hiddenbench_fixture.json"
CANARY_A = "sk-canaryTRIALq9Zt7wXr4Lm"      # key-shaped: the environment's API key
CANARY_B = "plainCanary23ZetaQ"             # not key-shaped: in URLs and options
CANARIES = (CANARY_A, CANARY_B)
SMALL = ["--templates", str(TPL), "--seeds", "0", "--budgets", "0.6", "--policies", "R1,ALL", "--variants", "PSP"]
LONG = "n" * 300


# --- cases ---------------------------------------------------------------------------------------

@dataclass
class Case:
    id: str
    group: str
    argv: list
    expect: str = "refuse"            # refuse: exit 1 or 2 with a message; usage: exit 2; ok: 0; fail: 1; any
    setup: Optional[Callable] = None   # setup(d) -> optional cleanup callable
    env: dict = field(default_factory=dict)
    fsize: Optional[int] = None        # RLIMIT_FSIZE in bytes
    timeout: float = 120
    may_change: tuple = ()             # fnmatch patterns (relative to the case folder) allowed to change
    stderr_has: tuple = ()
    stderr_lacks: tuple = ()
    no_out: bool = True                # a refused case leaves no {d}/out
    server: Optional[dict] = None      # fake server faults (a server of its own)
    post: Optional[Callable] = None    # post(ctx) -> list of problems
    clean: bool = False                # exit 0 must leave a clean (no error, no invalid) run in {d}/out
    folder: str = ""                   # the case's folder name (set by main)


class Ctx:
    def __init__(self, d: Path, proc, url: Optional[str], port: Optional[int], case: Case):
        self.d, self.proc, self.url, self.port, self.case = d, proc, url, port, case


def fill(a, d: Path, port: Optional[int]) -> str:
    s = str(a)
    url = f"http://{CANARY_B}@127.0.0.1:{port}/v1" if port else "http://127.0.0.1:9/v1"
    return (s.replace("{d}", str(d)).replace("{url}", url).replace("{port}", str(port or 9))
            .replace("{plainurl}", f"http://127.0.0.1:{port}/v1" if port else "http://127.0.0.1:9/v1"))


# --- setup helpers ---------------------------------------------------------------------------------

PREBUILT: dict[str, Path] = {}


def prebuild(base: Path) -> None:
    """A finished tiny ledger run and a finished HiddenBench run, copied into the cases that need them."""
    env = _env()
    run = base / "prebuilt-run"
    subprocess.run(CLI + ["run", "--out", str(run)] + SMALL, check=True, cwd=ROOT, env=env, capture_output=True)
    hb = base / "prebuilt-hb"
    subprocess.run(CLI + ["hiddenbench", "run", "--out", str(hb), "--limit", "1", "--seeds", "0",
                          "--policies", "R1,ALL"], check=True, cwd=ROOT, env=env, capture_output=True)
    cache = base / "prebuilt-cache"
    subprocess.run([PY, "-c", "import sys; sys.path.insert(0, 'tests')\n"
                    "from scripted_llm import Scripted\nfrom crossprofile_lib.backends.base import ChatRequest\n"
                    f"b = Scripted(lambda r: 'Reason.\\nDecision: A', cache={str(cache)!r})\n"
                    "b.chat([ChatRequest(({'role': 'user', 'content': f'q{i}'},)) for i in range(50)])\n"
                    "b.cache.close()"], check=True, cwd=ROOT, env=env, capture_output=True)
    PREBUILT.update(run=run, hb=hb, cache=cache)


def with_run(d: Path, name: str = "run") -> None:
    shutil.copytree(PREBUILT["run"], d / name)


def with_hb(d: Path, name: str = "hb") -> None:
    shutil.copytree(PREBUILT["hb"], d / name)


def with_cache(d: Path, name: str = "cache") -> None:
    shutil.copytree(PREBUILT["cache"], d / name)


def standard(d: Path) -> None:
    """What most cases may point at: a file, an empty folder, a FIFO, a symlink loop, a text file
    named like a model, a broken tokenizer.json."""
    (d / "file").write_text("keep me\n")
    (d / "empty").mkdir()
    os.mkfifo(d / "fifo")
    os.mkfifo(d / "fifo.yaml")
    os.mkfifo(d / "fifo.json")
    os.symlink(d / "loop", d / "loop")
    (d / "text.gguf").write_text("not a model\n")
    (d / "broken_tokenizer.json").write_text('{"model": [')
    (d / "bad.jinja").write_text("{% for m in messages %}{{ m.content }")
    (d / "raises.jinja").write_text("{{ raise_exception('no system prompt allowed') }}")
    (d / "undefined.jinja").write_text("{{ messages[5].content }}")
    (d / "hf-none").mkdir()
    (d / "hf-nokey").mkdir()
    (d / "hf-nokey" / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
    (d / "hf-list").mkdir()
    (d / "hf-list" / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": [{"name": "default", "template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}]}))
    (d / "hf-dup").mkdir()
    (d / "hf-dup" / "tokenizer_config.json").write_text('{"chat_template": "a", "chat_template": "{{ 1 }}"}')
    (d / "binary").write_bytes(bytes(range(256)) * 8)


def combine(*fns):
    def setup(d: Path):
        cleanups = [fn(d) for fn in fns]
        cleanups = [c for c in cleanups if callable(c)]
        if cleanups:
            return lambda: [c() for c in reversed(cleanups)]
    return setup


def writer(name: str, data):
    def setup(d: Path):
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8")
    return setup


def can_mount() -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    d = tempfile.mkdtemp(prefix="cp-mount-probe-")
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", d], capture_output=True)
    os.rmdir(d)
    return ok


def tmpfs(name: str, size: str, readonly: bool = False, fill_with: Optional[Callable] = None):
    def setup(d: Path):
        m = d / name
        m.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(m)], check=True)
        if fill_with:
            fill_with(m)
        if readonly:
            subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
        return lambda: subprocess.run(["umount", "-l", str(m)], capture_output=True)
    return setup


# --- checks -------------------------------------------------------------------------------------------

def snapshot(d: Path) -> dict:
    out = {}
    for p in d.rglob("*"):
        try:
            if p.is_symlink() or not p.is_file():
                continue
            if p.stat().st_size > 50 << 20:
                out[str(p.relative_to(d))] = ("big", p.stat().st_size)
                continue
            out[str(p.relative_to(d))] = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            continue
    return out


def keys_on_disk(d: Path) -> list[str]:
    found = []
    for p in d.rglob("*"):
        try:
            if p.is_symlink() or not p.is_file() or p.stat().st_size > 50 << 20:
                continue
            data = p.read_bytes()
        except OSError:
            continue
        for c in CANARIES:
            if c.encode() in data:
                found.append(f"{p.relative_to(d)} holds the key {c[:8]}...")
    return found


def run_is_clean(out: Path) -> list[str]:
    import pandas as pd
    try:
        df = pd.read_parquet(out / "results.parquet")
    except Exception as e:  # noqa: BLE001
        return [f"results unreadable after exit 0 ({type(e).__name__}: {e})"]
    probs = []
    if "error" in df and (df["error"] != "").any():
        probs.append(f"exit 0 with {int((df['error'] != '').sum())} error rows")
    if df["invalid"].any():
        probs.append(f"exit 0 with {int(df['invalid'].sum())} invalid decisions (the fake server answers validly)")
    return probs


def blank_cache_entries(cache_file: Path) -> int:
    if not cache_file.is_file():  # missing, or a FIFO/folder a case put there
        return 0
    try:
        db = sqlite3.connect(f"file:{cache_file}?mode=ro&immutable=1", uri=True)
        try:
            return db.execute("SELECT COUNT(*) FROM calls WHERE trim(text) = '' AND choice_logprobs IS NULL").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:  # a deliberately broken cache file of the case
        return 0


# --- the fake server ------------------------------------------------------------------------------------

def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(faults: dict, log: Optional[Path] = None):
    port = free_port()
    args = [PY, str(SERVER), "--port", str(port)]
    for k, v in faults.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    if log:
        args += ["--log", str(log)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdout.readline()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return p, port


def stop_server(p) -> None:
    if p is not None and p.poll() is None:
        p.kill()
        p.wait()


# --- running ------------------------------------------------------------------------------------------------

def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROSSPROFILE_", "OPENAI_", "DEEPSEEK_"))}
    env.update(PYTHONPATH=str(ROOT), CROSSPROFILE_API_KEY=CANARY_A, NO_COLOR="1", **extra)
    return env


def _limits(fsize: Optional[int]):
    def pre():
        os.setsid()
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes then fail with EFBIG instead of killing
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return pre


def run_cli(argv, d: Path, env: dict, timeout: float, fsize: Optional[int] = None):
    """(returncode or None on a hang, stdout, stderr, seconds)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(CLI + argv, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_limits(fsize))
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err, time.perf_counter() - t0


def run_case(case: Case, base: Path) -> dict:
    d = base / (case.folder or case.id)
    d.mkdir(parents=True)
    cleanup, server, port = None, None, None
    problems: list[str] = []
    try:
        standard(d)
        if case.setup:
            cleanup = case.setup(d)
        if case.server is not None:
            server, port = start_server({**case.server, "attempt_log": d / "served-times"}, d / "served.log")
        before = snapshot(d)
        argv = [fill(a, d, port) for a in case.argv]
        env = _env(**{k: fill(v, d, port) for k, v in case.env.items()})
        env.setdefault("CROSSPROFILE_CACHE", str(d / "calls-cache"))
        rc, out, err, secs = run_cli(argv, d, env, case.timeout, case.fsize)
        text = out + err
        if rc is None:
            problems.append(f"hang: no exit within {case.timeout:g} s")
        if "Traceback" in text:
            problems.append("traceback: " + err.strip().splitlines()[-1][:200] if err.strip() else "traceback")
        if "internal error" in err:
            problems.append("internal error: " + err.strip()[-200:])
        allowed = {"refuse": (1, 2), "usage": (2,), "ok": (0,), "fail": (1,), "any": (0, 1, 2)}[case.expect]
        if rc is not None and rc not in allowed:
            problems.append(f"exit {rc}, expected {case.expect} {allowed}: {err.strip()[-300:]}")
        if rc in (1, 2) and not err.strip():
            problems.append(f"exit {rc} without a message")
        for frag in case.stderr_has:
            if fill(frag, d, port) not in err:
                problems.append(f"stderr lacks {frag!r}: {err.strip()[-300:]}")
        for frag in case.stderr_lacks:
            if frag in err:
                problems.append(f"stderr says {frag!r}")
        for c in CANARIES:
            if c in text:
                problems.append(f"the key {c[:8]}... is printed")
        after = snapshot(d)
        for rel, h in before.items():
            if any(fnmatch.fnmatch(rel, pat) for pat in case.may_change) or rel.startswith(("served", "calls-cache")):
                continue
            if rel not in after:
                problems.append(f"lost work: {rel} was removed")
            elif after[rel] != h:
                problems.append(f"lost work: {rel} was changed")
        if rc in (1, 2) and case.no_out and (d / "out").exists() and case.expect in ("refuse", "usage"):
            if not any((d / "out").iterdir()) or case.expect == "usage":
                problems.append("a refused command left its output folder behind")
        if rc == 0 and case.clean:
            problems += run_is_clean(d / "out")
        for cache_file in list(d.rglob("calls.sqlite")):
            n = blank_cache_entries(cache_file)
            if n:
                problems.append(f"{cache_file.relative_to(d)} holds {n} blank answers (a poisoned cache)")
        if case.post is not None and rc is not None:
            problems += case.post(Ctx(d, (rc, out, err), None, port, case)) or []
        problems += keys_on_disk(d)
        return dict(id=case.id, group=case.group, rc=rc, seconds=round(secs, 2), problems=problems,
                    stderr_tail=err.strip()[-400:])
    except Exception as e:  # noqa: BLE001  (a broken case is reported, the trial goes on)
        return dict(id=case.id, group=case.group, rc=None, seconds=0, problems=[f"trial error: {type(e).__name__}: {e}"],
                    stderr_tail="")
    finally:
        stop_server(server)
        if callable(cleanup):
            cleanup()


# --- the case list --------------------------------------------------------------------------------------------

def run_argv(**over) -> list:
    """``crossprofile run`` on one template with ``over`` replacing (or, value None, dropping) options."""
    opts = {"--out": "{d}/out", "--templates": str(TPL), "--seeds": "0", "--budgets": "0.6", "--policies": "R1,ALL",
            "--variants": "PSP"}
    for k, v in over.items():
        opts[k] = v
    out = ["run"]
    for k, v in opts.items():
        if v is None:
            continue
        out += [k] + (v if isinstance(v, list) else [v])
    return out


INT_BAD = ["x", "1.5", "-1", "", " ", "1e3", "nan", "9" * 30, "0x10", "\u0661\u0662", "+-1", "1,2"]


def cli_cases() -> list[Case]:
    cs: list[Case] = []

    def add(cid, argv, **kw):
        cs.append(Case(cid, kw.pop("group", "command line"), argv, **kw))

    for v in ["x", "1.5", "-1", "4294967296", "", ",", "0,0", "1,01", "nan", "1e3", "\u0661", "0;1", "0 1"]:
        add(f"run-seeds-{v!r}", run_argv(**{"--seeds": v}), expect="usage")
    for v in ["0", "-0.5", "1.5", "nan", "inf", "1e-9", "0t", "-5t", "t", "half", "0.6,0.6", "", "128tt", "1e309",
              "0.6,0.60", "128t,t128", "99999999999999999999t"]:
        add(f"run-budgets-{v!r}", run_argv(**{"--budgets": v}), expect="refuse")
    for v in ["", "NOPE", "R1,R1", "B3", "R1-k0", "R1-k-1", "R1:nope", "R1-k" + "9" * 25, "../R1", ",", "BAL"]:
        add(f"run-policies-{v!r}", run_argv(**{"--policies": v}), expect="any" if v == "BAL" else "usage")
    for v in ["", "XYZ", "PSP,PSP", "psp", "PS", "PSPS", ","]:
        add(f"run-variants-{v!r}", run_argv(**{"--variants": v}), expect="usage")
    for v in INT_BAD + ["1", "0", "65", "1000000000"]:
        add(f"run-agents-{v!r}", run_argv(**{"--agents": v}), expect="usage")
    for v in ["1", "4", "11", "x", "1000000"]:
        add(f"run-options-{v!r}", run_argv(**{"--options": v}), expect="refuse")
    for v in ["", "ledger/x", "nosuch/m", "../x", "openai", "openai/", "llamacpp/{d}/nofile.gguf", "llamacpp//dev/zero",
              "llamacpp/{d}", "llamacpp/{d}/text.gguf", "llamacpp/{d}/fifo", "vllm/x", "LEDGER", " ledger/ "]:
        add(f"run-backend-{v!r}", run_argv(**{"--backend": v}), expect="refuse")
    for v in ["social_proof", "=1", "social_proof=true", "social_proof=nan", "social_proof=inf", "irrelevant_weight=inf",
              "irrelevant_weight=-inf", "inverse_temperature=-1", "inverse_temperature=nan", "inverse_temperature=true",
              "social_proof=abc", "no_such=1", "1abc=2", "social_proof=1e999", "social-proof=", "api_key=" + CANARY_B]:
        add(f"run-ledger-option-{v!r}", run_argv() + ["--backend-option", v], expect="refuse")
    for v in ["bogus", "gguf:{d}/nofile", "gguf:{d}/file", "gguf:{d}/fifo", "hf:{d}/empty", "hf:{d}/fifo",
              "{d}/broken_tokenizer.json", "{d}/fifo.json", "server", "/dev/zero", "gguf:/dev/zero", "hf:" + LONG]:
        add(f"run-tokenizer-{v!r}", run_argv(**{"--tokenizer": v}), expect="refuse")
    for v in ["", "{d}/file", "{d}/file/sub", "{d}/loop", "{d}/" + LONG, "{d}/" + LONG + "/x", "/proc/x", "{d}/fifo",
              "/dev/null", "{d}/loop/sub"]:
        add(f"run-out-{v[-20:]!r}", run_argv(**{"--out": v}), expect="usage", no_out=False)
    for v in ["{d}/nothing", "{d}/empty", "{d}/fifo.yaml", "/dev/zero", "{d}/loop", "{d}/" + LONG + ".yaml",
              "{d}/none/*.yaml", "{d}/file", "{d}/binary"]:
        add(f"run-templates-{v[-20:]!r}", run_argv(**{"--templates": v}), expect="refuse")
    for opt, a, b in [("--seeds", "0", "1"), ("--budgets", "0.6", "0.4"), ("--out", "{d}/out", "{d}/out2"),
                      ("--templates", str(TPL), str(TPL2)), ("--backend", "ledger", "ledger"), ("--policies", "R1", "ALL"),
                      ("--variants", "PSP", "SPS"), ("--agents", "4", "3"), ("--tokenizer", "offline", "offline")]:
        base = run_argv(**{opt: a})
        add(f"run-repeated{opt}", base + [opt, b], expect="usage", stderr_has=("given twice",))
    for opt, v in [("--concurrency", "4"), ("--timeout", "5"), ("--base-url", "http://h/v1"), ("--max-tokens", "5"),
                   ("--chat-template", "chatml"), ("--decision-mode", "score")]:
        add(f"run-ledger-takes-no{opt}", run_argv() + [opt, v], expect="usage")
    # stats / composition / validate / cache / fit-paper / hiddenbench
    for v in INT_BAD + ["0", "10000000000", "2000000"]:
        add(f"stats-resamples-{v!r}", ["stats", "{d}/run", "--resamples", v], expect="usage", setup=with_run)
    for v in ["-1", "x", "100000000"]:
        add(f"stats-fit-resamples-{v!r}", ["stats", "{d}/run", "--fit-resamples", v], expect="usage", setup=with_run)
    for v in ["-1", "4294967296", "x", "1.5"]:
        add(f"stats-seed-{v!r}", ["stats", "{d}/run", "--seed", v], expect="usage", setup=with_run)
    add("stats-analysis-set-nope", ["stats", "{d}/run", "--analysis-set", "nope"], expect="usage", setup=with_run)
    add("stats-repeated-prereg", ["stats", "{d}/run", "--prereg", str(ROOT / "prereg.yaml"), "--prereg",
                                  str(ROOT / "prereg.yaml")], expect="usage", setup=with_run)
    for v in ["{d}/nothing", "{d}/file", "{d}/fifo", "{d}/empty", "{d}/loop", "{d}/" + LONG, "/dev/zero", ""]:
        add(f"stats-dir-{v[-16:]!r}", ["stats", v, "--resamples", "20", "--fit-resamples", "0", "--no-regressions"])
        add(f"composition-dir-{v[-16:]!r}", ["composition", v])
    add("composition-budget-nope", ["composition", "{d}/run", "--budget", "nope"], expect="usage", setup=with_run)
    for v in ["{d}/nothing", "{d}/empty", "{d}/fifo.yaml", "/dev/zero", "{d}/loop", "{d}/" + LONG, "{d}/binary"]:
        add(f"validate-{v[-16:]!r}", ["validate", v])
    for v in ["1", "x", "11"]:
        add(f"validate-options-{v!r}", ["validate", str(TPL), "--options", v])
    for sub in ("check", "vacuum"):
        for v in ["{d}/nothing", "{d}/file", "{d}/fifo", "{d}/empty", "{d}/loop", "{d}/" + LONG, "/dev/zero",
                  "{d}/binary"]:
            # no cache yet (a missing path, a folder without calls.sqlite): `cache check` says where runs keep
            # their cache and exits 0 (issue 25: the README's own command must not fail before any run)
            no_cache_yet = sub == "check" and v in ("{d}/nothing", "{d}/empty")
            add(f"cache-{sub}-{v[-16:]!r}", ["cache", sub, v], **({"expect": "ok"} if no_cache_yet else {}))
    for v in ["{d}/nothing", "{d}/file", "{d}/fifo", "{d}/loop", "/dev/zero"]:
        add(f"cache-export-from-{v[-16:]!r}", ["cache", "export", v, "{d}/export.jsonl"])
    for v in ["-1", "x", "100000000"]:
        add(f"fit-paper-resamples-{v!r}", ["fit-paper", "--resamples", v], expect="usage")
    for v in ["x", "0,0", "-1"]:
        add(f"fit-paper-seeds-{v!r}", ["fit-paper", "--seeds", v], expect="usage")
    add("fit-paper-cache-a-file", ["fit-paper", "--cache", "{d}/file", "--resamples", "0"], expect="usage")
    add("fit-paper-cache-loop", ["fit-paper", "--cache", "{d}/loop", "--resamples", "0"], expect="usage")
    add("fit-paper-templates-empty", ["fit-paper", "--templates", "{d}/empty"], expect="usage")
    hb = ["hiddenbench", "run", "--out", "{d}/out", "--seeds", "0", "--policies", "R1,ALL", "--limit", "1"]
    for opt, vals in [("--tasks", ["", ",", "nosuch", "a,a"]), ("--limit", ["0", "-1", "x"]),
                      ("--batch-tasks", ["0", "100000"]), ("--max-words", ["0", "x"]), ("--ablations", ["nope", ""]),
                      ("--seeds", ["x", "0,0"]), ("--budgets", ["0", "1e-9", "-5t"]),
                      ("--policies", ["", "NOPE", "R1,R1"]), ("--protocol", ["natural", "nope"]),
                      ("--backend", ["ledger/x", "nosuch/x"]), ("--backend-option", ["social_proof=nan", "x"]),
                      ("--hiddenbench", ["{d}/nothing", "{d}/fifo", "/dev/zero", "{d}/empty", "{d}/loop", "{d}/" + LONG])]:
        for v in vals:
            argv = [a for a in hb]
            if opt in argv:
                i = argv.index(opt)
                argv[i + 1] = v
            else:
                argv += [opt, v]
            add(f"hb-run{opt}-{v[-16:]!r}", argv)
    add("hb-run-repeated-seeds", hb + ["--seeds", "1"], expect="usage", stderr_has=("given twice",))
    add("hb-run-repeated-out", hb + ["--out", "{d}/out2"], expect="usage", stderr_has=("given twice",))
    for v in ["{d}/nothing", "{d}/fifo", "/dev/zero", "{d}/empty", "{d}/loop", "{d}/" + LONG, "{d}/binary"]:
        add(f"hb-validate-{v[-16:]!r}", ["hiddenbench", "validate", v])
    return cs


def model_option_cases() -> list[Case]:
    """Options of the HTTP and embedded backends (against a live fake server)."""
    cs: list[Case] = []
    http = run_argv(**{"--backend": "openai/fake"}) + ["--base-url", "{url}", "--no-progress"]
    for opt, v in [("--timeout", "-5"), ("--timeout", "0"), ("--timeout", "nan"), ("--timeout", "1e9"),
                   ("--concurrency", "0"), ("--concurrency", "100000"), ("--max-retries", "-1"), ("--max-retries", "1000"),
                   ("--max-tokens", "0"), ("--decision-mode", "nope"), ("--decision-mode", "score"),
                   ("--chat-template", "{d}/bad.jinja"), ("--chat-template", "{d}/raises.jinja"),
                   ("--chat-template", "{d}/undefined.jinja"), ("--chat-template", "{d}/nothing.jinja"),
                   ("--chat-template", "{d}/empty"), ("--chat-template", "{d}/fifo"), ("--chat-template", "/dev/zero"),
                   ("--chat-template", "hf:{d}/hf-none"), ("--chat-template", "hf:{d}/hf-nokey"),
                   ("--chat-template", "hf:{d}/hf-dup"), ("--chat-template", "hf:{d}/file"),
                   ("--chat-template", "gguf:{d}/text.gguf"), ("--chat-template", "gguf:{d}/fifo"),
                   ("--chat-template", "{d}/binary")]:
        extra = [opt, v] + (["--decision-mode", "score"] if opt == "--chat-template" else [])
        cs.append(Case(f"http{opt}-{v[-14:]!r}", "model options", http + extra, server={}))
    for v in ["timeout=-5", "timeout=nan", "timeout=true", "concurrency=0", "max_retries=-1", "circuit_breaker=-1",
              "retry_wait=-1", "retry_wait=nan", "max_tokens=0", "reason_chars=0", "grammar_style=nope",
              "decision_prompt=nope", "extra_body=1"]:
        cs.append(Case(f"http-option-{v}", "model options", http + ["--backend-option", v], server={}))
    for v in ["http://[::1/v1", "ftp://h/v1", "http://", "http://h:99999/v1", "notaurl", "http://h:abc/v1", " ",
              "http://[::1]:abc/v1", ","]:
        argv = [a for a in http]
        argv[argv.index("--base-url") + 1] = v
        cs.append(Case(f"http-base-url-{v!r}", "model options", argv, server={}))
    emb = run_argv(**{"--backend": "llamacpp/smollm2-135m"}) + ["--no-progress"]
    for v in ["n_ctx=16", "n_ctx=0", "n_ctx=true", "n_ctx=x", "n_batch=0", "n_batch=-1", "n_threads=-2", "n_threads=0",
              "max_tokens=0", "n_ctx=300"]:
        cs.append(Case(f"llamacpp-option-{v}", "model options", emb + ["--backend-option", v], timeout=180))
    return cs


def _hb_record(**over):
    rec = json.loads(FIXTURE.read_text())[0]
    rec.update(over)
    return rec


def file_cases() -> list[Case]:
    cs: list[Case] = []
    # templates: the whole rejection corpus, through validate and through run
    for f in sorted(BROKEN.iterdir()):
        if f.name in ("expected.yaml", "make_broken.py"):
            continue
        cs.append(Case(f"template-validate-{f.name}", "template files", ["validate", str(f)], expect="fail"))
        cs.append(Case(f"template-run-{f.name}", "template files", run_argv(**{"--templates": str(f)}), expect="usage"))
    # a folder of mutated templates: each file a verdict
    def mutated(d: Path):
        import numpy as np
        rng = np.random.default_rng(23)
        good = TPL.read_bytes()
        m = d / "mutated"
        m.mkdir()
        for i in range(60):
            b = bytearray(good)
            for _ in range(int(rng.integers(1, 4))):
                pos = int(rng.integers(0, len(b)))
                b[pos:pos + int(rng.integers(1, 9))] = rng.bytes(int(rng.integers(0, 9)))
            (m / f"m{i:02d}.yaml").write_bytes(bytes(b))
    cs.append(Case("template-mutated-folder", "template files", ["validate", "{d}/mutated"], expect="fail", setup=mutated))
    # HiddenBench files
    recs = json.loads(FIXTURE.read_text())
    dup = json.dumps(recs[:2])[:-1]
    dup = dup[:dup.rfind("}")] + ', "correct_answer": ' + json.dumps(recs[1]["possible_answers"][0]) + "}]"
    hb_files = {
        "dup-key.json": (dup, "ok"),  # the record with the duplicate is skipped, reported
        "nul.json": (json.dumps([_hb_record(description="a\u0000b")]), "refuse"),
        "bidi.json": (json.dumps([_hb_record(description="a\u202eb")]), "refuse"),
        "surrogate.json": (json.dumps([_hb_record(description="x")]).replace('"x"', '"\\ud800"'), "refuse"),
        "bom.json": (b"\xef\xbb\xbf" + FIXTURE.read_bytes(), "ok"),
        "deep.json": ("[" * 5000 + "]" * 5000, "refuse"),
        "bigid.json": (json.dumps([_hb_record()]).replace('"id": ', '"id": ' + "7" * 5000 + ', "x": ', 1), "refuse"),
        "nan.json": (json.dumps([_hb_record()]).replace('"id": ', '"id": NaN, "x": ', 1), "refuse"),
        "utf16.json": (json.dumps(recs).encode("utf-16"), "refuse"),
        "latin1.json": (json.dumps(recs).replace('"name": "', '"name": "\u00e9', 1).encode("latin-1"), "refuse"),
        "object.json": ("{}", "refuse"),
        "empty.json": ("[]", "refuse"),
        "not-json.json": ("[{", "refuse"),
        "all-malformed.json": (json.dumps([{"id": 1}, 5, None]), "refuse"),
        "some-malformed.json": (json.dumps(recs[:2] + [{"id": "broken"}]), "ok"),
        "id-list.json": (json.dumps([_hb_record(id=[1, 2])]), "refuse"),
        "answer-object.json": (json.dumps([_hb_record(correct_answer={"a": 1})]), "refuse"),
        "huge-string.json": (json.dumps([_hb_record(description="word " * 200_000)]), "ok"),
    }
    for name, (data, expect) in hb_files.items():
        setup = writer(name, data)
        cs.append(Case(f"hb-file-validate-{name}", "HiddenBench files", ["hiddenbench", "validate", "{d}/" + name],
                       expect="ok" if expect == "ok" and "malformed" not in name and "dup" not in name else "any",
                       setup=setup))
        stderr_has = ("skipped malformed record",) if name in ("dup-key.json", "some-malformed.json") else ()
        cs.append(Case(f"hb-file-run-{name}", "HiddenBench files",
                       ["hiddenbench", "run", "--out", "{d}/out", "--hiddenbench", "{d}/" + name, "--seeds", "0",
                        "--policies", "R1,ALL", "--limit", "1"], expect=expect, setup=setup, stderr_has=stderr_has,
                       no_out=True))
    def sparse(d: Path):
        with open(d / "sparse.json", "wb") as fh:
            fh.truncate(200 << 20)
    cs.append(Case("hb-file-validate-sparse-200MB", "HiddenBench files", ["hiddenbench", "validate", "{d}/sparse.json"],
                   setup=sparse, timeout=60))
    cs.append(Case("hb-env-fifo", "HiddenBench files", ["hiddenbench", "validate", "{d}/fifo"], timeout=60))
    cs.append(Case("hb-env-path-fifo", "HiddenBench files", ["hiddenbench", "run", "--out", "{d}/out", "--seeds", "0",
                                                             "--policies", "R1"], env={"HIDDENBENCH_PATH": "{d}/fifo"},
                   timeout=60))
    # prereg files
    prereg = (ROOT / "prereg.yaml").read_text()
    pre_files = {
        "binary.yaml": bytes(range(256)) * 4, "deep.yaml": "a: " + "[" * 3000 + "]" * 3000 + "\n",
        "dup.yaml": prereg + "\ncontrasts: []\n", "alias.yaml": "a: &x [1]\nb: *x\n",
        "tag.yaml": "contrasts: !!python/object/apply:os.system ['echo x']\n", "list.yaml": "- 1\n- 2\n",
        "empty.yaml": "", "utf16.yaml": prereg.encode("utf-16"), "bom.yaml": b"\xef\xbb\xbf" + prereg.encode(),
        "nul.yaml": prereg.replace("contrasts:", "contrasts:\x00", 1), "bad-field.yaml": prereg + "\nnope: 1\n",
        "huge.yaml": "# " + "x" * (2 << 20) + "\n", "bigint.yaml": "version: " + "1" * 5000 + "\n",
    }
    for name, data in pre_files.items():
        expect = "ok" if name == "bom.yaml" else "usage"
        cs.append(Case(f"prereg-{name}", "prereg files",
                       ["stats", "{d}/run", "--prereg", "{d}/" + name, "--resamples", "20", "--fit-resamples", "0",
                        "--no-regressions"], expect=expect, setup=combine(with_run, writer(name, data)),
                       may_change=("run/.crossprofile_stats/*",)))
    for v in ["{d}/empty", "{d}/fifo", "/dev/zero", "{d}/nothing", "{d}/loop"]:
        cs.append(Case(f"prereg-path-{v[-10:]!r}", "prereg files", ["stats", "{d}/run", "--prereg", v], expect="usage",
                       setup=with_run))
    # run folders given to stats and composition
    def run_json(data):
        return combine(with_run, writer("run/run.json", data))
    stats = ["--resamples", "20", "--fit-resamples", "0", "--no-regressions"]
    folders = {
        "parquet-direct": (with_run, "{d}/run/results.parquet", "ok"),
        "run-json-list": (run_json("[1, 2]"), "{d}/run", "ok"),
        "run-json-broken": (run_json("{"), "{d}/run", "ok"),
        "run-json-deep": (run_json("[" * 5000 + "]" * 5000), "{d}/run", "ok"),
        "run-json-config-list": (run_json('{"config": [1]}'), "{d}/run", "ok"),
        "results-garbage": (combine(with_run, writer("run/results.parquet", b"PAR1garbagePAR1")), "{d}/run", "refuse"),
        "results-empty": (combine(with_run, writer("run/results.parquet", b"")), "{d}/run", "refuse"),
        "results-folder": (lambda d: (d / "r2").mkdir() or (d / "r2" / "results.parquet").mkdir(), "{d}/r2", "refuse"),
        "results-fifo": (lambda d: (d / "r3").mkdir() or os.mkfifo(d / "r3" / "results.parquet"), "{d}/r3", "refuse"),
    }
    # a damaged or wrong-shaped run.json: stats and composition refuse (what it records -- policy files, templates
    # -- is unknown, issue 37; the table cannot be verified against it, issue 51: --trust-edited analyses it anyway)
    damaged_header = {"run-json-list", "run-json-broken", "run-json-deep", "run-json-config-list"}
    for name, (setup, path, expect) in folders.items():
        cs.append(Case(f"stats-folder-{name}", "run folders", ["stats", path] + stats,
                       expect="refuse" if name in damaged_header else expect, setup=setup,
                       may_change=("run/.crossprofile_stats/*",), timeout=180))
        cs.append(Case(f"composition-folder-{name}", "run folders", ["composition", path],
                       expect="refuse" if name in damaged_header else "ok" if expect == "ok" else "refuse",
                       setup=setup))
        if name in damaged_header:
            cs.append(Case(f"composition-folder-{name}-trust-edited", "run folders",
                           ["composition", path, "--trust-edited"], expect="ok", setup=setup))
    # tokenizer files
    for v in ["gguf:{d}/text.gguf", "hf:{d}/hf-none", "{d}/broken_tokenizer.json", "hf:{d}/fifo"]:
        cs.append(Case(f"tokenizer-file-{v[-18:]!r}", "tokenizer files", run_argv(**{"--tokenizer": v})))
    # call caches given to run --cache
    def broken_cache(kind):
        def setup(d: Path):
            with_cache(d)
            f = d / "cache" / "calls.sqlite"
            if kind == "zero":
                f.write_bytes(b"")
            elif kind == "truncate":
                os.truncate(f, f.stat().st_size // 2)
            elif kind == "random":
                f.write_bytes(os.urandom(f.stat().st_size))
            elif kind == "dir":
                f.unlink()
                f.mkdir()
            elif kind == "fifo":
                f.unlink()
                os.mkfifo(f)
            elif kind == "text":
                f.write_text("hello")
        return setup
    http = run_argv(**{"--backend": "openai/fake"}) + ["--base-url", "{url}", "--no-progress", "--cache", "{d}/cache"]
    for kind in ("zero", "truncate", "random", "dir", "fifo", "text"):
        cs.append(Case(f"cache-file-{kind}", "cache files", http, setup=broken_cache(kind), server={}, expect="usage"))
        cs.append(Case(f"cache-check-{kind}", "cache files", ["cache", "check", "{d}/cache"], setup=broken_cache(kind),
                       expect="fail"))
    return cs


def destroy_cases() -> list[Case]:
    cs: list[Case] = []

    def add(cid, argv, **kw):
        cs.append(Case(cid, "destroying work", argv, **kw))
    add("run-over-a-run-of-another-grid", run_argv(**{"--out": "{d}/run", "--seeds": "1"}), expect="usage",
        setup=with_run, stderr_has=("--overwrite",), no_out=False)
    add("run-over-a-run-same-grid", run_argv(**{"--out": "{d}/run"}), expect="ok", setup=with_run,
        may_change=("run/*",), no_out=False)
    add("run-over-a-run-with-overwrite", run_argv(**{"--out": "{d}/run", "--seeds": "1"}) + ["--overwrite"], expect="ok",
        setup=with_run, may_change=("run/*",), no_out=False)
    add("run-into-a-hiddenbench-run", run_argv(**{"--out": "{d}/hb"}), expect="usage", setup=with_hb,
        stderr_has=("hiddenbench run",), no_out=False)
    add("run-into-a-hiddenbench-run-overwrite", run_argv(**{"--out": "{d}/hb"}) + ["--overwrite"], expect="usage",
        setup=with_hb, no_out=False)
    add("hiddenbench-run-into-a-run", ["hiddenbench", "run", "--out", "{d}/run", "--limit", "1", "--seeds", "0",
                                       "--policies", "R1"], expect="usage", setup=with_run, no_out=False)

    def tplcopy(d: Path):
        (d / "tpl").mkdir()
        shutil.copy(TPL, d / "tpl" / TPL.name)
    add("run-out-is-the-template-folder", run_argv(**{"--out": "{d}/tpl", "--templates": "{d}/tpl"}), expect="usage",
        setup=tplcopy, no_out=False)
    add("run-out-inside-the-template-folder", run_argv(**{"--out": "{d}/tpl/out", "--templates": "{d}/tpl"}),
        expect="usage", setup=tplcopy, no_out=False)
    add("run-out-is-the-template-files-folder", run_argv(**{"--out": "{d}/tpl", "--templates": "{d}/tpl/" + TPL.name}),
        expect="usage", setup=tplcopy, no_out=False)
    add("hb-out-is-the-data-folder", ["hiddenbench", "run", "--out", "{d}/data", "--hiddenbench", "{d}/data/hb.json",
                                      "--limit", "1", "--seeds", "0", "--policies", "R1"], expect="usage",
        setup=writer("data/hb.json", FIXTURE.read_text()), no_out=False)
    add("cache-export-over-the-cache", ["cache", "export", "{d}/cache", "{d}/cache/calls.sqlite"], expect="usage",
        setup=with_cache, no_out=False)
    add("cache-export-over-the-cache-overwrite", ["cache", "export", "{d}/cache", "{d}/cache/calls.sqlite",
                                                  "--overwrite"], expect="usage", setup=with_cache, no_out=False)
    add("cache-export-over-the-wal", ["cache", "export", "{d}/cache/calls.sqlite", "{d}/cache/calls.sqlite-wal"],
        expect="usage", setup=with_cache)
    add("cache-export-to-a-folder", ["cache", "export", "{d}/cache", "{d}/empty"], expect="usage", setup=with_cache)
    add("cache-export-to-proc", ["cache", "export", "{d}/cache", "/proc/x.jsonl"], expect="usage", setup=with_cache)
    add("cache-export-no-parent", ["cache", "export", "{d}/cache", "{d}/nope/x.jsonl"], expect="usage", setup=with_cache)
    add("cache-export-existing", ["cache", "export", "{d}/cache", "{d}/file"], expect="usage", setup=with_cache)
    add("cache-export-existing-overwrite", ["cache", "export", "{d}/cache", "{d}/file", "--overwrite"], expect="ok",
        setup=with_cache, may_change=("file",))
    add("cache-export-fine", ["cache", "export", "{d}/cache", "{d}/export.jsonl"], expect="ok", setup=with_cache)
    add("cache-export-to-fifo", ["cache", "export", "{d}/cache", "{d}/fifo"], expect="usage", setup=with_cache,
        timeout=60)
    def tplbad(d: Path):
        (d / "tplbad").mkdir()
        shutil.copy(TPL, d / "tplbad" / "a.yaml")
        shutil.copy(BROKEN / "23-hint-best.yaml", d / "tplbad" / "b.yaml")
    add("fit-paper-broken-template", ["fit-paper", "--templates", "{d}/tplbad", "--resamples", "0"], expect="usage",
        setup=tplbad, stderr_has=("rule 5",))
    return cs


def fault_cases(mount: bool) -> list[Case]:
    cs: list[Case] = []
    # --tokenizer offline: the faults are the calls' own; pricing without a tokenize endpoint is refused unless
    # named (issue 28: budgets never change silently), which the model-option cases check
    http = run_argv(**{"--backend": "openai/fake"}) + ["--base-url", "{url}", "--no-progress", "--max-retries", "3",
                                                       "--tokenizer", "offline", "--backend-option", f"api_key={CANARY_B}"]
    fast = ["--backend-option", "retry_wait=0.05", "--backend-option", "retry_wait_max=0.2"]
    tolerated = {"burst-500": {"burst_500": 3}, "429-once": {"fail_first": 1, "fail_status": 429},
                 "503-once": {"fail_first": 1, "fail_status": 503}, "empty-once": {"empty_first": 1},
                 "reset-once": {"reset_first": 1}, "malformed-once": {"malformed_first": 1},
                 "slow-once": {"delay_first": 1, "delay_s": 3}}
    for name, faults in tolerated.items():
        extra = ["--timeout", "1"] if name == "slow-once" else []
        cs.append(Case(f"server-{name}", "server faults", http + fast + extra, expect="ok", server=faults, clean=True,
                       stderr_lacks=("circuit_breaker",)))
    cs.append(Case("server-retry-after", "server faults", http + fast, expect="ok", clean=True,
                   server={"fail_first": 1, "fail_status": 429, "retry_after": 2}, post=_waited(2.0)))
    for name, faults in {"empty-always": {"empty_first": 10_000}, "503-always": {"fail_first": 10_000,
                                                                                   "fail_status": 503},
                         "reset-always": {"reset_first": 10_000}}.items():
        cs.append(Case(f"server-{name}", "server faults", http + fast, expect="fail", server=faults, no_out=False,
                       stderr_lacks=("no server answered",) if name == "reset-always" else (),
                       post=_recovers if name == "empty-always" else None))
    cs.append(Case("server-401", "server faults", http + fast, expect="fail", server={"api_key": "other"},
                   no_out=False))
    closed = [a if a != "{url}" else f"http://{CANARY_B}@127.0.0.1:9/v1?code={CANARY_B}" for a in http]
    cs.append(Case("server-closed-port", "server faults", closed + fast, expect="fail", timeout=60,
                   stderr_has=("no server answered",)))
    cs.append(Case("server-query-key", "server faults",
                   [a if a != "{url}" else f"http://127.0.0.1:{{port}}/v1?code={CANARY_B}&api-version=1" for a in http]
                   + fast, expect="any", server={}, no_out=False))
    cs.append(Case("server-kill-9-lock", "server faults", http, expect="any", server={"latency_s": 0.5}, no_out=False,
                   post=_kill9))
    # a file-size limit (EFBIG) while writing the results
    cs.append(Case("efbig-run-results", "full disk", run_argv(**{"--out": "{d}/run"}), expect="fail", setup=with_run,
                   fsize=4096, stderr_has=("cannot write",), no_out=False, may_change=("run/.crossprofile.lock",)))
    cs.append(Case("efbig-hiddenbench", "full disk", ["hiddenbench", "run", "--out", "{d}/out", "--seeds", "0",
                                                      "--policies", "R1,ALL", "--limit", "1"], expect="fail",
                   fsize=2048, no_out=False))
    cs.append(Case("efbig-cache-export", "full disk", ["cache", "export", "{d}/cache", "{d}/export.jsonl"],
                   expect="fail", setup=with_cache, fsize=1024, no_out=False))
    dev = [a if a != str(TPL) else str(ROOT / "templates" / "dev") for a in http]
    cs.append(Case("efbig-http-cache", "full disk", dev + fast + ["--cache", "{d}/c"], expect="fail", server={},
                   fsize=20_000, no_out=False, stderr_lacks=("move the file aside",), stderr_has=("not damaged",)))
    if mount:
        dev = [a if a != str(TPL) else str(ROOT / "templates" / "dev") for a in http]
        cs.append(Case("tmpfs-full-cache", "full disk", dev + fast + ["--cache", "{d}/full/c"], expect="fail",
                       server={}, setup=tmpfs("full", "48k"), no_out=False, stderr_lacks=("move the file aside",),
                       stderr_has=("disk holding it is full",)))
        cs.append(Case("tmpfs-full-out", "full disk", run_argv(**{"--out": "{d}/full/out"}), expect="refuse",
                       setup=tmpfs("full", "64k", fill_with=lambda m: (m / "pad").write_bytes(b"x" * (60 << 10))),
                       no_out=False))
        cs.append(Case("tmpfs-full-hiddenbench", "full disk", ["hiddenbench", "run", "--out", "{d}/full/out", "--seeds",
                                                               "0", "--policies", "R1,ALL", "--limit", "1"],
                       expect="refuse", setup=tmpfs("full", "32k"), no_out=False))
        cs.append(Case("readonly-out", "full disk", run_argv(**{"--out": "{d}/ro/out"}), expect="usage",
                       setup=tmpfs("ro", "64k", readonly=True)))

        def ro_cache(m: Path):
            shutil.copytree(PREBUILT["cache"], m / "c")
        cs.append(Case("readonly-cache", "full disk", http + fast + ["--cache", "{d}/ro/c"], expect="refuse",
                       server={}, setup=tmpfs("ro", "256k", readonly=True, fill_with=ro_cache),
                       stderr_lacks=("move the file aside",), no_out=False))
    return cs


def _waited(seconds: float):
    """The retry of a request answered with ``Retry-After: S`` came at least S seconds later."""
    def post(ctx: Ctx) -> list[str]:
        f = ctx.d / "served-times"
        by_req: dict[str, list[float]] = {}
        for line in (f.read_text().splitlines() if f.exists() else []):
            k, t = line.split()
            by_req.setdefault(k, []).append(float(t))
        gaps = [ts[1] - ts[0] for ts in by_req.values() if len(ts) >= 2]
        if not gaps:
            return ["no request was retried"]
        if min(gaps) < 0.9 * seconds:
            return [f"Retry-After: {seconds:g} ignored (a retry came after {min(gaps):.2f} s)"]
        return []
    return post


def _recovers(ctx: Ctx) -> list[str]:
    """After a run against a server that always answered blank, the recovered server is asked again
    (the blanks were never cached) and the rerun is clean."""
    problems = []
    server, port = start_server({}, ctx.d / "served2.log")
    try:
        argv = [fill(a, ctx.d, port) for a in run_argv(**{"--backend": "openai/fake"})] + [
            "--base-url", f"http://127.0.0.1:{port}/v1", "--no-progress", "--tokenizer", "offline"]
        rc, out, err, _ = run_cli(argv, ctx.d, _env(CROSSPROFILE_CACHE=str(ctx.d / "calls-cache")), 120)
        calls = len((ctx.d / "served2.log").read_text().split()) if (ctx.d / "served2.log").exists() else 0
        if rc != 0:
            problems.append(f"rerun after recovery exit {rc}: {err.strip()[-200:]}")
        elif calls == 0:
            problems.append("rerun after recovery made 0 calls (blank answers were cached)")
        else:
            problems += run_is_clean(ctx.d / "out")
    finally:
        stop_server(server)
    return problems


def _kill9(ctx: Ctx) -> list[str]:
    """A run killed with SIGKILL leaves its lock: the lock names no key, and the next run takes it over."""
    problems = []
    server, port = start_server({"latency_s": 0.3})
    try:
        argv = run_argv(**{"--backend": "openai/fake", "--out": "{d}/k9".replace("{d}", str(ctx.d)),
                           "--templates": str(ROOT / "templates" / "dev")}) + [
            "--base-url", f"http://{CANARY_B}@127.0.0.1:{port}/v1", "--no-progress", "--tokenizer", "offline",
            "--backend-option", f"api_key={CANARY_B}"]
        p = subprocess.Popen(CLI + argv, cwd=ctx.d, env=_env(CROSSPROFILE_CACHE=str(ctx.d / "calls-cache")),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lock = ctx.d / "k9" / ".crossprofile.lock"
        for _ in range(200):
            if lock.exists() and lock.stat().st_size:
                break
            time.sleep(0.05)
        time.sleep(1.0)
        p.kill()
        p.wait()
        if not lock.exists():
            problems.append("no lock file was left by the killed run")
        rc, out, err, _ = run_cli(argv, ctx.d, _env(CROSSPROFILE_CACHE=str(ctx.d / "calls-cache")), 180)
        if rc != 0:
            problems.append(f"the run after kill -9 exit {rc}: {err.strip()[-200:]}")
        if CANARY_B in err:
            problems.append("the key is printed by the run after kill -9")
    finally:
        stop_server(server)
    return problems


# --- main ------------------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--only", default=None, help="run only the cases whose id contains this")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bad_input_trial.json"))
    ap.add_argument("--keep", action="store_true", help="keep the case folders")
    a = ap.parse_args(argv)
    rec = Recorder("python benchmarks/bad_input_trial.py" + (f" --only {a.only}" if a.only else "")
                   + (f" --jobs {a.jobs}" if a.jobs != 3 else ""))
    base = Path(tempfile.mkdtemp(prefix="cp-trial-"))
    mount = can_mount()
    t0 = time.perf_counter()
    prebuild(base)
    cases = cli_cases() + model_option_cases() + file_cases() + destroy_cases() + fault_cases(mount)
    if a.only:
        cases = [c for c in cases if a.only in c.id]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    for i, c in enumerate(cases):  # folder names: short, safe and unique
        c.folder = f"{i:03d}"
    work = base / "cases"
    work.mkdir()

    def one(c: Case) -> dict:
        res = run_case(c, work)
        if res["problems"]:
            print(f"FAIL {c.id}: {'; '.join(res['problems'])[:400]}", flush=True)
        return res
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(one, cases))
    failed = [r for r in results if r["problems"]]
    kinds = {}
    for r in failed:
        for p in r["problems"]:
            k = p.split(":")[0]
            kinds[k] = kinds.get(k, 0) + 1
    groups = {}
    for r in results:
        g = groups.setdefault(r["group"], {"cases": 0, "failed": 0})
        g["cases"] += 1
        g["failed"] += bool(r["problems"])
    report = {
        "mount_cases": mount,
        "seconds": round(time.perf_counter() - t0, 1),
        "cases": len(results), "failed": len(failed),
        "problems_by_kind": kinds, "groups": groups,
        "checks": ["no traceback or internal error", "no hang (each case has a time limit)",
                   "expected exit status with a message", "no file that existed before changed or removed",
                   "a refused command leaves no output folder", "exit 0 leaves no error row, no invalid decision, "
                   "no blank answer in a call cache", "no canary key in any file under the case folder or in output"],
        "failures": failed,
    }
    report["exit_codes"] = {k: sum(str(r["rc"]) == k for r in results) for k in sorted({str(r["rc"]) for r in results})}
    report["cases_run"] = [{k: r[k] for k in ("id", "group", "rc", "seconds")} for r in results]
    rec.write(a.out, report)
    print(f"{len(results)} cases, {len(failed)} failed ({report['seconds']} s); groups: "
          + ", ".join(f"{g} {v['cases'] - v['failed']}/{v['cases']}" for g, v in groups.items()) + f" -> {a.out}")
    if not a.keep:
        subprocess.run(["umount", "-l", *[str(p) for p in base.rglob("*") if p.is_mount()]], capture_output=True) \
            if mount else None
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
