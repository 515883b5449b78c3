"""Issue 51, kind 5: no key, from any source the suite accepts, reaches a file the suite writes or a message it
prints -- one redaction rule (``crossprofile_lib/safety/redact.py``) for every writer. The keys here are NOT
key-shaped (no ``sk-``), so only the rule "a key the suite was handed is masked wherever it appears" can catch them.
Each route runs the real command line in its own process, against the project's fake server where a server is
involved; then every file under the output and cache folders and both console streams are searched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossprofile_lib.safety import redact

ROOT = Path(__file__).resolve().parents[1]
KEY = "plainKey-4711-quiet"          # the environment's key, no key shape
OTHER = "anotherSecret-0815-calm"    # a key handed over on the command line
SMALL = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6", "--variants", "PSP"]
GUARD = 600  # a hang guard only


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_") and "API_KEY" not in k}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), CROSSPROFILE_API_KEY=KEY, **extra)
    return env


def _cli(args, tmp_path, **extra):
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT,
                          env=_env(tmp_path, **extra), capture_output=True, text=True, timeout=GUARD)


def leaks(tmp_path, r, *secrets) -> list[str]:
    """Where any of ``secrets`` appears: console streams and every file under ``tmp_path`` (binary too)."""
    found = [f"console: {s}" for s in secrets if s in r.stdout + r.stderr]
    for p in tmp_path.rglob("*"):
        if p.is_file() and not p.name.endswith(".py"):
            data = p.read_bytes()
            found += [f"{p}: {s}" for s in secrets if s.encode() in data]
    return found


def test_a_refused_memory_line_quoting_the_environments_key_is_masked(tmp_path):
    """Before: the refusal of a policy's memory line quoted the line, key and all."""
    f = tmp_path / "quotes_key.py"
    f.write_text("import os\nfrom crossprofile_lib.policies import Policy\nfrom crossprofile_lib.task.memory import Memory\n"
                 "def build(spec, x):\n"
                 "    return Memory(spec.name, 'claims', (), (), 'key: ' + os.environ['CROSSPROFILE_API_KEY'], 3)\n"
                 "POLICY = Policy('Quote', 'unbudgeted', build=build)\n")
    r = _cli(["run", "--policy-file", f, "--policies", "R1", *SMALL, "--out", tmp_path / "out"], tmp_path)
    assert r.returncode == 2 and f"{f}: facts: policy 'Quote'" in r.stderr and "key: ***" in r.stderr, r.stderr
    assert leaks(tmp_path, r, KEY) == []


@pytest.mark.parametrize("argv", [["--api-key=" + OTHER], ["--api-key", OTHER], ["--openai-token=" + OTHER]])
def test_a_mistyped_key_option_is_not_echoed_by_the_parser(argv, tmp_path):
    """Before: argparse answered 'unrecognized arguments: --api-key=KEY'."""
    r = _cli(["run", *argv, "--out", tmp_path / "out"], tmp_path)
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr and "***" in r.stderr, r.stderr
    assert leaks(tmp_path, r, OTHER) == []


def test_the_rule_masks_known_secrets_in_every_shape(monkeypatch):
    """Hand-checked: the environment's key and a registered one are masked in text, URL paths, option values
    and JSON; a short or ordinary environment value is not (the near miss: SSH_AUTH_SOCK, XDG_SESSION_TYPE)."""
    monkeypatch.setenv("MY_SERVICE_API_KEY", KEY)
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    monkeypatch.setenv("XDG_SESSION_TYPE", "tty")
    monkeypatch.setenv("SHORT_TOKEN", "abc")
    monkeypatch.setenv("PWD", "/home/someone/projects")  # the working folder, not a password
    monkeypatch.setenv("OLDPWD", "/home/someone/elsewhere")
    redact.register_secret(OTHER)
    assert redact.redact_text(f"line with {KEY} and {OTHER}") == "line with *** and ***"
    assert redact.redact_url(f"http://h:1/{KEY}/v1") == "http://h:1/***/v1"
    assert redact.redact_url("http://h:1/Qz7Yq2Lw9Xc4Vb8Nm1Kj/v1") == "http://h:1/***/v1"     # random-looking
    assert redact.redact_url("http://h:1/Qwen2.5-7B-Instruct/v1") == "http://h:1/Qwen2.5-7B-Instruct/v1"  # a name
    assert redact.redact_value("extra_body", {"user": KEY, "x-api-key": "v", "n": 1}) == {
        "user": "***", "x-api-key": "***", "n": 1}
    assert redact.redact_text("see /tmp/agent.sock, a tty, abc, /home/someone/projects/run") == (
        "see /tmp/agent.sock, a tty, abc, /home/someone/projects/run")
    assert redact.redact_text("error: unrecognized arguments: --api-key=zz9z --seeds 0") == (
        "error: unrecognized arguments: --api-key=*** --seeds 0")
    assert redact.holds_secret(f"Decision: A ({KEY})") and not redact.holds_secret("Decision: A")
    assert set(redact.argv_secrets(["run", "--api-key", "k-one", "--backend-option", "api_key=k-two",
                                    "--request-field", '{"x": {"token": "k-three"}}', "--base-url",
                                    "http://u:k-four@h/v1", "--seeds", "0,1"])) == {"k-one", "k-two", "k-three", "k-four"}
