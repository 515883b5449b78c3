"""Issue 37: a policy file of your own that raises, loops, returns more than its budget or facts not in
the discussion is refused naming its file and the rule, within the time limit (``--policy-timeout``,
``CROSSPROFILE_POLICY_TIMEOUT``), exit 2, no traceback, nothing written -- each through the real
command line in its own process (``run``, ``composition`` and the book's ``POLICY_FILES=``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossprofile_lib.policies import plugins
from crossprofile_lib.task.discussion import Claim, ClaimList

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--templates", "templates/dev/dev-hospital-01.yaml", "--seeds", "0", "--budgets", "0.6", "--variants", "PSP"]
HEAD = "from crossprofile_lib.policies import Policy\nfrom crossprofile_lib.task.memory import Memory\n"

#: name -> (file body, rule named, words of the message)
BAD = {
    "loops-at-import": ("from crossprofile_lib.policies import Policy\nwhile True:\n    pass\n", "time",
                        "importing it ran longer than the time limit of 1 s"),
    "loops-in-order": (HEAD + "def order(cl, ctx):\n    while True:\n        pass\n"
                       "POLICY = Policy('Spin', 'copy', order=order)\n", "time",
                       "policy 'Spin': order() ran longer than the time limit of 1 s"),
    "sleeps-in-build": (HEAD + "import time\ndef build(spec, x):\n    time.sleep(3600)\n"
                        "POLICY = Policy('Nap', 'unbudgeted', build=build)\n", "time",
                        "policy 'Nap': build() ran longer than the time limit"),
    "loop-catches-exceptions": (HEAD + "def order(cl, ctx):\n    while True:\n        try:\n            pass\n"
                                "        except Exception:\n            pass\n"
                                "POLICY = Policy('Stubborn', 'copy', order=order)\n", "time", "time limit of 1 s"),
    "raises-in-packer": (HEAD + "def packer(cl, order, budget, tok, ctx):\n    raise KeyError('no such claim')\n"
                         "POLICY = Policy('Pk', 'copy', order=lambda cl, ctx: list(range(len(cl))), packer=packer)\n",
                         "trial", "policy 'Pk': packer() raised KeyError: 'no such claim' (line 4)"),
    "raises-in-build": (HEAD + "def build(spec, x):\n    return x.nothing_here\n"
                        "POLICY = Policy('Bd', 'unbudgeted', build=build)\n", "trial",
                        "policy 'Bd': build() raised AttributeError"),
    "build-returns-a-string": (HEAD + "POLICY = Policy('Str', 'unbudgeted', build=lambda spec, x: 'all of it')\n",
                               "type", "build() returned a str, not a crossprofile_lib.task.memory.Memory"),
    "invents-a-fact": (HEAD + "def build(spec, x):\n"
                       "    c = x.claims.claims[0]\n"
                       "    text = c.line() + '\\nA2: Medora Devices was fined for fraud last year.'\n"
                       "    return Memory(spec.name, 'claims', (c,), (1,), text, 5)\n"
                       "POLICY = Policy('Inv', 'unbudgeted', build=build)\n", "facts",
                       "line 2 of its memory text is in neither the discussion nor the claim list"),
}


def _cli(args, tmp_path, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSPROFILE_")}
    env.update(CROSSPROFILE_CACHE=str(tmp_path / "cache"), **env_extra)
    return subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_misbehaving_policy_file_is_refused_naming_file_and_rule(case, tmp_path):
    body, rule, words = BAD[case]
    f = tmp_path / f"{case.replace('-', '_')}.py"
    f.write_text(body)
    out = tmp_path / "out"
    r = _cli(["run", "--policy-file", f, "--policy-timeout", "1", "--policies", "R1", *SMALL, "--out", out], tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"{f}: {rule}: " in r.stderr and words in r.stderr, r.stderr[-3000:]
    assert "Traceback" not in r.stderr + r.stdout
    assert not out.exists()


LIAR = (HEAD + "def build(spec, x):\n"
         "    text = (x.transcript.render() + '\\n') * 40\n"
         "    return Memory(spec.name, 'summary', (), (), text, 1)\n"
         "POLICY = Policy('Liar', 'generated', needs=frozenset({'transcript'}), build=build)\n")


def test_a_generated_policy_over_its_budget_is_refused_whatever_it_reports(tmp_path):
    """A generated policy gets no trial (it needs a model): the run, against the local server, recounts the
    memory text it returns with the run's tokenizer and stops on the first one over its budget."""
    from test_reliability_server import Server
    f = tmp_path / "liar.py"
    f.write_text(LIAR)
    out = tmp_path / "out"
    with Server(tmp_path) as url:
        r = _cli(["run", "--backend", "openai/fake", "--base-url", url, "--tokenizer", "offline", "--no-progress",
                  "--policy-file", f, "--policies", "Liar", *SMALL, "--out", out], tmp_path, CROSSPROFILE_API_KEY="k")
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"{f}: budget: policy 'Liar': its memory text is" in r.stderr and "(it reported 1)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (out / "results.parquet").exists()


def test_the_time_limit_comes_from_the_environment_and_applies_to_the_book(tmp_path):
    f = tmp_path / "spin.py"
    f.write_text(BAD["loops-in-order"][0])
    r = _cli(["composition", "runs/none", "--policy-file", f], tmp_path, CROSSPROFILE_POLICY_TIMEOUT="1")
    assert r.returncode == 2 and f"{f}: time: " in r.stderr and "time limit of 1 s" in r.stderr, r.stderr
    r = _cli(["book", "--quick", "--no-html", "--out", tmp_path / "book"], tmp_path, POLICY_FILES=str(f),
             CROSSPROFILE_POLICY_TIMEOUT="1")
    assert r.returncode == 2 and "POLICY_FILES=" in r.stderr and f"{f}: time: " in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / "book").exists()


def test_a_good_policy_file_passes_the_guard_and_runs(tmp_path):
    """The guard refuses only what breaks a rule: the README's example and a transcript-keeping policy run."""
    f = tmp_path / "whole.py"
    f.write_text(HEAD + "def build(spec, x):\n"
                 "    text = x.transcript.render()\n"
                 "    return Memory(spec.name, 'transcript', tuple(x.claims.claims), (1,) * len(x.claims), text, 0)\n"
                 "POLICY = Policy('Whole', 'unbudgeted', needs=frozenset({'transcript'}), build=build)\n")
    out = tmp_path / "out"
    r = _cli(["run", "--policy-file", f, "--policy-file", "examples/policies/keep_longest.py", "--policy-timeout", "5",
              "--policies", "Whole,Longest", *SMALL, "--out", out], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "results.parquet").exists()


def test_foreign_line_tells_said_from_invented():
    """Hand-checked (issue 51): a line must EQUAL a line of the discussion or a claim line, with or without its
    label (agents of the discussion or a claim id) and a list mark; anything added is refused -- the near misses
    below each hold the whole claim, which the old substring rule let through."""
    cl = ClaimList((Claim("Helix pumps failed twice in 2023.", ("A1", "A3"), 0),), ("A1", "A2", "A3"),
                   ("A1", "A2", "A3"))

    class T:
        @staticmethod
        def render():
            return "A1: Helix pumps failed twice in 2023.\nA2: I agree with that."
    ok = ["A1: Helix pumps failed twice in 2023.", "Helix pumps failed twice in 2023.",
          "[A1,A3] Helix pumps failed twice in 2023.", "[A3] Helix pumps failed twice in 2023.",
          "[C01] Helix pumps failed twice in 2023.", "- [A1,A3] Helix pumps failed twice in 2023.",
          "2. I agree with that.\n---", "  A2: I agree with that.  "]
    for text in ok:
        assert plugins.foreign_line(text, cl, T) is None, text
    added = ["- Helix pumps failed twice in 2023. (A1, A3)",             # a label of its own invention
             "Helix pumps failed twice in 2023. answer B",               # claim + an answer
             "It is false that Helix pumps failed twice in 2023.",       # claim negated
             "Helix pumps failed twice in 2023. Everyone agreed on this.",  # claim + an invented consensus
             "[Everyone] Helix pumps failed twice in 2023.",             # a label naming no agent
             "Consensus: Helix pumps failed twice in 2023.",             # a speaker no one was
             "A2: I agree with this."]
    for text in added:
        assert plugins.foreign_line(text, cl, T) == (1, text.strip()), text
    assert plugins.foreign_line("Helix pumps failed twice in 2023.\nHelix pumps failed once.", cl, T) == (
        2, "Helix pumps failed once.")


def test_time_limit_values(monkeypatch):
    saved = plugins.TIMEOUT[0]
    try:
        plugins.TIMEOUT[0] = None
        monkeypatch.delenv(plugins.TIMEOUT_ENV, raising=False)
        assert plugins.time_limit() == plugins.DEFAULT_TIMEOUT
        monkeypatch.setenv(plugins.TIMEOUT_ENV, "2.5")
        assert plugins.time_limit() == 2.5
        for bad in ("-1", "nan", "1e9", "soon"):
            monkeypatch.setenv(plugins.TIMEOUT_ENV, bad)
            with pytest.raises(ValueError, match=plugins.TIMEOUT_ENV):
                plugins.time_limit()
        plugins.TIMEOUT[0] = 0.0  # --policy-timeout 0 wins over the environment
        assert plugins.time_limit() == 0.0
    finally:
        plugins.TIMEOUT[0] = saved
