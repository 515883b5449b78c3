"""Issue 34 item 2, the command line, redaction, count limits and the messy protocol's measures.

* **CLI defaults against their help text**: every option whose help says ``default X`` parses to X when
  not given (read from the parser itself, every command); the run command's documented effective
  defaults (seeds 0,1,2; agents 4; options 3).
* **Option and agent count limits**: ``--agents 2..64``, ``--options 2..10`` and the HiddenBench importer's
  2..10 answers and at least 2 agents: the edges are accepted and one past them refused, naming the rule.
* **What makes two runs "the same grid"** (:func:`crossprofile_lib.cli.run.grid_differences`): options that
  change how calls are sent are not the grid, everything that changes a decision is; the template list is
  compared as the files it names.
* **Redaction of unusual URL credentials** (:func:`crossprofile_lib.safety.redact.redact_url`): a password
  holding ``@`` or ``:``, an empty user name, a non-numeric port, a credential in the fragment, percent
  encoding, other schemes; and a property test that no generated password survives.
* **The messy protocol's measures** (:func:`crossprofile_lib.task.extraction.merge_quality`): merge precision
  and recall, split and rare-looking rates on hand-made groupings, each a different number under the
  near misses (counting fact-less pairs, per-claim instead of per-pair, >= 1 instead of > 1 claims...).
"""

from __future__ import annotations

import argparse
import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossprofile_lib.safety.redact import MASK, redact_text, redact_url, url_secrets

# --- CLI defaults against their help text ----------------------------------------------------------

_DEFAULT = re.compile(r"\(default:? ([^;)]+)[;)]|; default ([^;)]+)\)")


def _commands():
    """``(command words, parser)`` of every command and sub-command, each parser built for its command."""
    from crossprofile_lib.cli import build_parser

    def subs(p):
        return next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)

    out = []

    def walk(p, words):
        s = subs(p)
        if s is None:
            out.append((" ".join(words), p))
            return
        for n, sp in s.choices.items():
            walk(sp, words + [n])
    for cmd in subs(build_parser()).choices:
        walk(subs(build_parser([cmd])).choices[cmd], [cmd])
    return out


def _documented_defaults():
    out = []
    for cmd, sp in _commands():
        for a in sp._actions:
            m = _DEFAULT.search(a.help or "")
            if m and a.option_strings and a.default not in (None, ""):  # None / "": resolved later (below)
                out.append((cmd, a.option_strings[-1], (m.group(1) or m.group(2)).strip(), a))
    return out


def test_the_help_texts_name_defaults_to_check():
    assert len(_documented_defaults()) >= 12


@pytest.mark.parametrize("cmd,opt,said,action", _documented_defaults(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_documented_default_is_the_parsed_default(cmd, opt, said, action):
    said = said.split(",  ")[0]
    if not re.fullmatch(r"[\w.,:/-]+", said.split(", the ")[0]):  # prose ("0, none"): not one value
        pytest.skip(f"{cmd} {opt}: default described in words ({said})")
    said = said.split(", the ")[0]
    got = action.default
    if action.type is not None and isinstance(action.default, str):   # argparse converts string defaults
        got = action.type(action.default)
    if isinstance(got, (list, tuple)):
        got = ",".join(map(str, got))
    assert str(got) == said, f"{cmd} {opt}: help says default {said}, the parser's is {action.default!r}"


def _run_args(*extra):
    from crossprofile_lib.cli import build_parser
    return build_parser(["run"]).parse_args(["run", "--out", "x", *extra])


def _help(cmd, dest):
    return next(a.help for c, p in _commands() if c == cmd for a in p._actions if a.dest == dest)


def test_defaults_resolved_after_parsing_match_their_help():
    """Options whose parser default is None: the value the run takes when they are not given."""
    import inspect

    from crossprofile_lib.backends.openai_compat import OpenAICompatBackend
    from crossprofile_lib.design import BUDGET_GRID, DEFAULT_POLICIES
    from crossprofile_lib.hiddenbench.config import HBConfig
    from crossprofile_lib.run.config import RunConfig
    from crossprofile_lib.task.messy import DEFAULT_OPINION_RATE
    cfg = RunConfig()
    assert "(default 0,1,2)" in _help("run", "seeds") and tuple(cfg.seeds) == (0, 1, 2)
    assert "(default 0.4,0.6,0.8,128t)" in _help("run", "budgets")
    assert ",".join(str(b) for b in cfg.budgets) == ",".join(str(b) for b in BUDGET_GRID) == "0.4,0.6,0.8,128t"
    assert f"(default: {','.join(DEFAULT_POLICIES)}" in _help("run", "policies") and tuple(cfg.policies) == DEFAULT_POLICIES
    assert "(default: all 8)" in _help("run", "variants") and len(cfg.variants) == 8
    assert "(default oracle;" in _help("run", "extraction") and cfg.extraction == "oracle"
    assert f"(default {DEFAULT_OPINION_RATE:g}" in _help("run", "opinion_rate") and cfg.opinion_rate == 0.25
    assert f"(default: {','.join(HBConfig().policies)})" in _help("hiddenbench run", "policies")
    sig = inspect.signature(OpenAICompatBackend.__init__).parameters
    for dest, param in (("max_retries", "max_retries"), ("timeout", "timeout"), ("max_tokens", "max_tokens")):
        m = re.search(r"\(default (\d+)", _help("run", dest))
        assert m and float(m.group(1)) == float(sig[param].default), dest


def test_run_defaults_match_their_help():
    a = _run_args()
    opts = {act.dest: act for c, p in _commands() if c == "run" for act in p._actions}
    assert a.agents == 4 and "default 4" in opts["agents"].help
    assert a.options == 3 and "default 3" in opts["options"].help


# --- count limits --------------------------------------------------------------------------------

@pytest.mark.parametrize("opt,low,high", [("--agents", 2, 64), ("--options", 2, 10)])
def test_run_count_limits_accept_the_edges_and_refuse_one_past(opt, low, high, capsys):
    for ok in (low, high):
        a = _run_args(opt, str(ok))
        assert getattr(a, opt[2:]) == ok
    for bad in (low - 1, high + 1):
        with pytest.raises(SystemExit) as e:
            _run_args(opt, str(bad))
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {opt}" in err and str(bad) in err


def _hb_record(n_agents=3, n_answers=3):
    answers = [f"answer {i}" for i in range(n_answers)]
    return {"id": "t1", "description": "pick one", "shared_information": ["s"],
            "hidden_information": [f"h{i}" for i in range(n_agents)], "possible_answers": answers,
            "correct_answer": answers[0]}


@pytest.mark.parametrize("agents,answers,ok,field", [
    (2, 2, True, ""), (2, 10, True, ""), (2, 11, False, "possible_answers"), (2, 1, False, "possible_answers"),
    (1, 3, False, "hidden_information"), (12, 3, True, ""),
])
def test_hiddenbench_count_limits(agents, answers, ok, field):
    from crossprofile_lib.hiddenbench.importer import HiddenBenchError, parse_record
    if ok:
        t = parse_record(_hb_record(agents, answers), 0)
        assert t.n_agents == agents and len(t.answers) == answers
    else:
        with pytest.raises(HiddenBenchError, match=field):
            parse_record(_hb_record(agents, answers), 0)


def test_template_option_count_must_equal_n_options(dev_templates):
    from crossprofile_lib.safety.inputs import TemplateError
    from crossprofile_lib.task.templates import validate_template
    t = dev_templates[0]
    validate_template(t, "x.yaml", n_options=3)
    for n in (2, 4):
        with pytest.raises(TemplateError, match=f"expected {n} options, found 3"):
            validate_template(t, "x.yaml", n_options=n)


# --- the same grid -----------------------------------------------------------------------------

def _finished(tmp_path, cfg):
    from crossprofile_lib.run.results import config_record
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "run.json").write_text(json.dumps({"config": config_record(cfg)}, default=str))
    return tmp_path


def test_same_grid_ignores_how_calls_are_sent_and_sees_what_decides(tmp_path):
    from crossprofile_lib.cli.run import grid_differences
    from crossprofile_lib.run.config import RunConfig
    base = RunConfig(templates=("templates/dev",), seeds=(0, 1), backend_options={"temperature": 0, "concurrency": 4})
    d = _finished(tmp_path, base)
    assert grid_differences(base, d) == []
    for opts in ({"temperature": 0, "concurrency": 16, "timeout": 5, "api_key": "k2", "base_url": "http://other/v1"},
                 {"temperature": 0, "max_retries": 9, "circuit_breaker": 3, "cache": "/elsewhere"}):
        assert grid_differences(RunConfig(templates=("templates/dev",), seeds=(0, 1), backend_options=opts), d) == []
    diff = grid_differences(RunConfig(templates=("templates/dev",), seeds=(0, 1),
                                      backend_options={"temperature": 0.7, "concurrency": 4}), d)
    assert diff == ["--backend-option temperature 0 there, 0.7 now"]
    assert grid_differences(RunConfig(templates=("templates/dev",), seeds=(0, 2),
                                      backend_options={"temperature": 0, "concurrency": 4}), d) == ["seeds 0,1 there, 0,2 now"]
    assert any(x.startswith("n_agents") for x in grid_differences(
        RunConfig(templates=("templates/dev",), seeds=(0, 1), n_agents=5,
                  backend_options={"temperature": 0, "concurrency": 4}), d))
    unset = grid_differences(RunConfig(templates=("templates/dev",), seeds=(0, 1), backend_options={"concurrency": 4}), d)
    assert unset == ["--backend-option temperature 0 there, (unset) now"]


def test_same_grid_compares_the_template_files_not_their_spelling(tmp_path, dev_templates):
    from crossprofile_lib.cli.run import grid_differences
    from crossprofile_lib.run.config import RunConfig
    from crossprofile_lib.task.templates import template_paths
    files = tuple(str(p) for p in template_paths(["templates/dev"]))
    d = _finished(tmp_path, RunConfig(templates=("templates/dev",)))
    assert grid_differences(RunConfig(templates=files), d) == []
    diff = grid_differences(RunConfig(templates=files[:-1]), d)
    assert len(diff) == 1 and diff[0].startswith("templates")


def test_a_folder_without_a_readable_header_is_not_the_same_grid(tmp_path):
    from crossprofile_lib.cli.run import grid_differences
    from crossprofile_lib.run.config import RunConfig
    assert grid_differences(RunConfig(), tmp_path)[0].startswith("its run.json cannot be read")
    (tmp_path / "run.json").write_text(json.dumps({"rows": 3}))
    assert grid_differences(RunConfig(), tmp_path) == ["its run.json records no configuration"]


# --- redaction of unusual URL credentials ----------------------------------------------------------

K = "Zq9-canary-Xw7"


@pytest.mark.parametrize("url,want", [
    (f"http://user:{K}@x@h/v1", "http://***@h/v1"),                 # a password holding '@' (the last '@' ends it)
    (f"http://user:{K}:more@h:8/v1", "http://***@h:8/v1"),          # a password holding ':'
    (f"http://:{K}@h/v1", "http://***@h/v1"),                       # no user name
    (f"http://{K}@h/v1", "http://***@h/v1"),                        # the key as user name
    (f"http://u:{K}@h:notaport/v1", "http://***@h:notaport/v1"),    # a bad port: unparsable, still masked
    (f"wss://u:{K}@h/stream", "wss://***@h/stream"),                 # another scheme
    (f"http://h/v1#access_token={K}", "http://h/v1#access_token=***"),
    (f"http://h/v1#{K}", "http://h/v1#***"),
    (f"http://u:{K}%40x@h/v1", "http://***@h/v1"),                  # percent-encoded
    (f"http://h/v1?api-version=2&key={K}", "http://h/v1?api-version=2&key=***"),
    (f"http://h/v1?a=1;key={K}", "http://h/v1?a=***"),             # ';' is no separator: the whole value goes
])
def test_unusual_credentials_are_masked(url, want):
    assert redact_url(url) == want
    assert K not in redact_text(f"error reaching {url} now")


@pytest.mark.parametrize("url,secret", [
    (f"http://user:{K}@x@h/v1", f"{K}@x"), (f"http://:{K}@h/v1", K), (f"http://{K}@h/v1", K),
    (f"http://h/v1#{K}", K), (f"http://h/v1?region=eu&q={K}", K)])
def test_url_secrets_name_the_unusual_parts(url, secret):
    assert secret in url_secrets(url)
    assert "eu" not in url_secrets(url)


def test_a_password_holding_a_quote_does_not_leak_from_free_text():
    """RFC 3986 allows ' in userinfo; the free-text URL match stops at a quote, so the secret parts must go first."""
    url = "http://user:ab'cd-Zq9x@h/v1"
    out = redact_text(f"cannot reach {url} now", url_secrets(url))
    assert "Zq9x" not in out and "ab'cd" not in out
    assert out == "cannot reach http://***@h/v1 now"


_PW = st.text(st.sampled_from("abcXYZ019-_.~!$&'()*+,;=:@%"), min_size=1, max_size=20)


@settings(max_examples=80, deadline=None)
@given(_PW, st.sampled_from(["http", "https", "ws"]), st.sampled_from(["", ":8080", ":notaport"]))
def test_no_password_survives_redaction(pw, scheme, port):
    secret = f"QQ{pw}QQ"
    url = f"{scheme}://user:{secret}@host.example{port}/v1"
    out = redact_url(url)
    assert secret not in out and "QQ" not in out
    assert out.endswith(f"***@host.example{port}/v1")
    assert "QQ" not in redact_text(f"cannot reach {url}", url_secrets(url))


# --- the messy protocol's measures -----------------------------------------------------------------

def _mt(rows, order=("A1", "A2", "A3", "A4")):
    from crossprofile_lib.task.discussion import Transcript, Utterance
    from crossprofile_lib.task.messy import MessyTranscript
    utt = tuple(Utterance(i, s, text, None) for i, (s, text, _) in enumerate(rows))
    return MessyTranscript(Transcript(tuple(order), utt), tuple(f for _, _, f in rows),
                           tuple(0 if f else -1 for _, _, f in rows), 0.0)


#: F1 said by A1, A2, A3 (positions 0, 2, 4), F2 by A1 only (1), fact-less lines 3 and 5 (A2, A4), F3 by A2, A4 (6, 7)
ROWS = [("A1", "f1 a", "F1"), ("A1", "f2", "F2"), ("A2", "f1 b", "F1"), ("A2", "ok", None),
        ("A3", "f1 c", "F1"), ("A4", "sure", None), ("A2", "f3 a", "F3"), ("A4", "f3 b", "F3")]


def _quality(groups, dev_templates):
    from crossprofile_lib.task.extraction import extract, merge_quality
    from crossprofile_lib.task.variants import agent_names
    mt = _mt(ROWS)
    ex = extract(mt, "model", dev_templates[0], agent_names(4), extractor=lambda utt: groups)
    return merge_quality(mt, ex)


@pytest.mark.parametrize("groups,prec,rec,split,rare", [
    # perfect: 3 + 1 same-fact pairs merged, nothing else
    ([[0, 2, 4], [1], [3], [5], [6, 7]], 1.0, 1.0, 0.0, 0.0),
    # F1 split into {0, 2} and {4}: recall 2/4; F1 is split and its claim {4} shows one speaker
    ([[0, 2], [4], [1], [3], [5], [6, 7]], 1.0, 2 / 4, 1 / 2, 1 / 2),
    # the two fact-less lines merged together: not counted (precision stays 1)
    ([[0, 2, 4], [1], [3, 5], [6, 7]], 1.0, 1.0, 0.0, 0.0),
    # F2 merged with a fact-less line: one false pair of 5 -> precision 4/5
    ([[0, 2, 4], [1, 3], [5], [6, 7]], 4 / 5, 1.0, 0.0, 0.0),
    # F3 split into two single-speaker claims: split and rare-looking; recall 3/4
    ([[0, 2, 4], [1], [3], [5], [6], [7]], 1.0, 3 / 4, 1 / 2, 1 / 2),
    # F1's {0, 2} and F3 merged: 1 + 1 true + 4 false pairs; F1 split ({4} alone): split 1/2
    ([[0, 2, 6, 7], [4], [1], [3], [5]], 2 / 6, 2 / 4, 1 / 2, 1 / 2),
])
def test_merge_precision_recall_split_and_rare_looking_rates(dev_templates, groups, prec, rec, split, rare):
    q = _quality(groups, dev_templates)
    assert (q.precision, q.recall, q.split_rate, q.rare_rate) == pytest.approx((prec, rec, split, rare))


def test_a_split_fact_whose_parts_each_show_two_speakers_is_split_but_not_rare_looking(dev_templates):
    rows = [("A1", "f a", "F1"), ("A2", "f a", "F1"), ("A3", "f b", "F1"), ("A4", "f b", "F1")]
    from crossprofile_lib.task.extraction import extract, merge_quality
    from crossprofile_lib.task.variants import agent_names
    mt = _mt(rows)
    q = merge_quality(mt, extract(mt, "model", dev_templates[0], agent_names(4), extractor=lambda u: [[0, 1], [2, 3]]))
    assert q.split_rate == 1.0 and q.rare_rate == 0.0 and q.recall == pytest.approx(2 / 6)


def test_a_fact_said_twice_by_one_speaker_is_not_shared(dev_templates):
    rows = [("A1", "f a", "F1"), ("A1", "f b", "F1")]
    from crossprofile_lib.task.extraction import extract, merge_quality
    from crossprofile_lib.task.variants import agent_names
    mt = _mt(rows)
    q = merge_quality(mt, extract(mt, "model", dev_templates[0], agent_names(4), extractor=lambda u: [[0], [1]]))
    assert math.isnan(q.split_rate) and math.isnan(q.rare_rate) and q.recall == 0.0 and math.isnan(q.precision)


def test_masking_constant():
    assert MASK == "***"


@pytest.mark.parametrize("secret,masked", [("ab3de", True), ("ab3d", True), ("ab3", False)])
def test_free_text_masks_given_secrets_of_four_characters_or_more(secret, masked):
    out = redact_text(f"server said: key {secret} rejected", [secret])
    assert (secret not in out) is masked and (out == "server said: key *** rejected") is masked


@pytest.mark.parametrize("p,shown", [(0.001, "0.001"), (0.000999, "< 0.001"), (0.0424, "0.042"), (1.0, "1.000")])
def test_book_p_values_below_one_in_a_thousand_are_shown_as_such(p, shown):
    from crossprofile_lib.book.display import _p_value
    assert _p_value(p) == shown
