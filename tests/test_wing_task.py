"""The task wing's rules where they live (issue 55: the mutmut samples' survivors, seeds 55 and 56). Claim
extraction: the exact level merges utterances equal after collapsing white space and case (and nothing else), the
fuzzy level joins the earliest claim at the threshold, and merge quality's precision, recall, split and rare-looking
rates, on a hand-made transcript whose numbers differ under each near miss. Then the templates' and domains files'
error messages, hint folding, oracle stances, tone balance, provenance, role blindness, validation verdicts, and the
served model's tokenizer (probe, counts, deadline) against a fake tokenize server on 127.0.0.1."""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from crossprofile_lib.safety.inputs import TemplateError
from crossprofile_lib.task import hints
from crossprofile_lib.task.discussion import Claim, ClaimList, Utterance, make_task
from crossprofile_lib.task.domains import read_domains
from crossprofile_lib.task.evidence import Stance, oracle_stances, tone_balance
from crossprofile_lib.task.extraction import FUZZY_THRESHOLD, extract, merge_quality
from crossprofile_lib.task.messy import messy_discussion
from crossprofile_lib.task.provenance import render_lines
from crossprofile_lib.task.templates import Option, load_template, validate_template
from crossprofile_lib.task.tokenizer import ServerTokenizer, TokenizerUnavailable, _probe_one, get_tokenizer, probe_servers
from crossprofile_lib.task.validate import validate_paths
from crossprofile_lib.task.variants import agent_names

LINES = [("A1", "The oven is OLD.", "f1"),
         ("A2", "the   oven is old.", "f1"),           # the same after white space and case
         ("A3", "The oven\tis old.", "f1"),             # a tab
         ("A2", "The flour is damp.", "f2"),
         ("A4", "The oven is old!", "f1"),              # different punctuation: not exact
         ("A1", "I think we should pick B.", None),
         ("A3", "The flour is damp", "f2")]             # no full stop


def transcript(lines=LINES):
    utt = tuple(Utterance(i, s, t) for i, (s, t, _) in enumerate(lines))
    return SimpleNamespace(utterances=utt, truth=tuple(f for *_, f in lines), speaker_order=("A1", "A2", "A3", "A4"))


def test_exact_merges_on_collapsed_white_space_and_case_only():
    mt = transcript()
    ex = extract(mt, "exact", None, ("A1", "A2", "A3", "A4"))
    assert ex.members == ((0, 1, 2), (3,), (4,), (5,), (6,))
    c = ex.claims.claims
    assert c[0].text == "The oven is OLD." and c[0].speakers == ("A1", "A2", "A3") and c[0].first_mention == 0
    assert c[0].fact_id == "f1" and c[0].first_speaker == "A1" and c[3].fact_id is None


def test_merge_quality_by_hand():
    mt = transcript()
    q = merge_quality(mt, extract(mt, "exact", None, ("A1", "A2", "A3", "A4")))
    # merged pairs: (0,1), (0,2), (1,2), all f1: precision 3/3; same-fact pairs: f1 has 4 lines (6 pairs), f2 2 (1)
    assert q.precision == 1.0 and q.recall == pytest.approx(3 / 7)
    # both facts are said by 2+ speakers and both fall into 2 claims; each has a single-speaker claim
    assert q.split_rate == 1.0 and q.rare_rate == 1.0 and q.n_claims == 5 and q.n_fact_claims == 4
    o = merge_quality(mt, extract(mt, "oracle", SimpleNamespace(fact=lambda fid: SimpleNamespace(text=fid)),
                                  ("A1", "A2", "A3", "A4")))
    assert o.precision == 1.0 and o.recall == 1.0 and o.split_rate == 0.0 and o.rare_rate == 0.0


def test_fuzzy_joins_at_the_threshold_and_a_fact_less_merge_lowers_precision():
    mt = transcript()
    f = extract(mt, "fuzzy", None, ("A1", "A2", "A3", "A4"))
    assert f.members == ((0, 1, 2, 4), (3, 6), (5,))
    q = merge_quality(mt, f)
    assert q.recall == 1.0 and q.precision == 1.0 and q.split_rate == 0.0
    strict = extract(mt, "fuzzy", None, ("A1", "A2", "A3", "A4"), threshold=100.0)
    assert strict.members == ((0, 1, 2, 4), (3, 6), (5,))        # default_process drops case and punctuation
    assert FUZZY_THRESHOLD == 80.0
    lines = [("A1", "The oven is old", "f1"), ("A2", "The oven is very old", None)]     # ratio 85.7
    loose = extract(transcript(lines), "fuzzy", None, ("A1", "A2"), threshold=85.7)
    assert loose.members == ((0, 1),)
    lq = merge_quality(transcript(lines), loose)
    assert lq.precision == 0.0 and math.isnan(lq.recall) and math.isnan(lq.split_rate)
    apart = extract(transcript(lines), "fuzzy", None, ("A1", "A2"), threshold=85.8)
    assert apart.members == ((0,), (1,)) and math.isnan(merge_quality(transcript(lines), apart).precision)


def test_unknown_level_and_model_without_extractor_are_refused():
    mt = transcript()
    with pytest.raises(ValueError, match="not one of"):
        extract(mt, "approximate", None, ("A1",))
    with pytest.raises(ValueError, match="needs a model backend"):
        extract(mt, "model", None, ("A1",))
    m = extract(mt, "model", None, ("A1", "A2", "A3", "A4"), extractor=lambda utt: [[6, 3], [], [0], [5, 1, 2, 4]])
    assert m.members == ((0,), (1, 2, 4, 5), (3, 6))


# --- the rest of the task wing's rules (issue 55, the seed-55 sample's survivors) ------------------------------------

ROOT = Path(__file__).resolve().parents[1]
HOSPITAL = ROOT / "templates" / "dev" / "dev-hospital-01.yaml"


def _replace_fact(t, fid, **update):
    return t.model_copy(update={"facts": tuple(f.model_copy(update=update) if f.id == fid else f for f in t.facts)})


def test_a_domains_file_with_a_second_key_is_refused_naming_the_rule(tmp_path):
    p = tmp_path / "domains.yaml"
    p.write_text(yaml.safe_dump({"domains": ["ferry operator"], "extra": 1}))
    with pytest.raises(TemplateError) as ei:
        read_domains(p)
    msg = str(ei.value)
    assert str(p) in msg and ei.value.field == "<file>" and ei.value.rule == "domains file"
    assert ei.value.detail == "a domains file holds one key, 'domains', with a list of names" and ei.value.detail in msg


def test_an_unknown_domain_is_named_cut_at_60_characters_with_the_domains_a_file_adds(tmp_path):
    (tmp_path / "domains.yaml").write_text(yaml.safe_dump({"domains": ["ferry operator", "airport catering contract"]}))
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data.update(id="own-01", domain="x" * 70)
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    msg = str(ei.value)
    assert f"domain '{'x' * 60}' is not one of the 12 decision domains" in msg
    # the file's own domains, sorted, after the paper's twelve
    assert ", nor one a domains.yaml adds (airport catering contract, ferry operator)" in msg


def test_a_template_id_that_is_not_a_safe_name_is_refused_naming_it(tmp_path):
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data.update(id="bad id")
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert ei.value.field == "id" and "template id 'bad id' is not a safe name" in str(ei.value)
    assert "('.' inside)" in str(ei.value)


def test_a_fact_about_no_option_is_refused_naming_the_id(hospital):
    with pytest.raises(TemplateError) as ei:
        validate_template(_replace_fact(hospital, "F03", about="nowhere"), "x.yaml")
    assert ei.value.field == "facts[2].about" and "'nowhere' is not an option id" in str(ei.value)


def test_a_missing_role_count_names_the_role_polarity_and_option(hospital):
    # F06 (support, about the correct option, +1) turned against the decoy: rules 1-3 still hold, the counts do not
    t = _replace_fact(hospital, "F06", about="corvane", polarity=-1)
    with pytest.raises(TemplateError) as ei:
        validate_template(t, "x.yaml")
    assert ei.value.field == "facts"
    assert "expected 3 support facts with polarity +1 about the correct option, found 2" in str(ei.value)


def test_paraphrase_sets_are_checked_with_the_templates_own_option_count(hospital):
    four = hospital.model_copy(update={"options": (*hospital.options, Option(id="tavor", name="Tavor Health"))})
    assert validate_template(four, "x.yaml", n_options=4) == []
    with pytest.raises(TemplateError, match="expected 3 options, found 4"):
        validate_template(four, "x.yaml", n_options=3)


def test_an_address_and_a_comparison_are_described_differently():
    a = hints.describe_comparison(hints.Comparison("choose option b", "address"))
    assert a == "'choose option b' addresses the decision model or tells it what to answer"
    c = hints.describe_comparison(hints.Comparison("cheapest of the three", "comparison with the other options"))
    assert c.startswith("'cheapest of the three' is a comparison with the other options: a fact must not rank")
    assert "addresses" not in c


@pytest.mark.parametrize("text", ["be\u00adst", "be\u200bst", "b\u20ddest", "be\u0301st"])
def test_fold_drops_format_characters_enclosing_and_accent_marks(text):
    # soft hyphen and zero-width space (Cf), a combining enclosing circle (Me), a combining acute (Mn)
    assert hints.fold(text) == "best"
    assert hints.find_hint(f"Acme is the {text} supplier").disguised


def test_oracle_stances_read_the_roles_of_the_template(hospital):
    claims = ClaimList((Claim("x", ("A1",), 0, "F01"), Claim("y", ("A2",), 1, None), Claim("z", ("A1",), 2, "F03"),
                        Claim("w", ("A3",), 3, "F04")), ("A1", "A2", "A3"))
    task = make_task(hospital, "PSP", 0)
    # F01: decoy +1 about corvane (relevant); F03: irrelevant +1 about medora; F04: support -1 about corvane
    assert oracle_stances(claims, task) == (Stance("corvane", 1, True), None, Stance("medora", 1, False),
                                            Stance("corvane", -1, True))


def _toned(tone):
    # irrelevant facts about the correct option (+1 each) or the decoy (-1 each), and a relevant one that never counts
    facts = [SimpleNamespace(about="c" if tone > 0 else "d", polarity=1, relevant=False) for _ in range(abs(tone))]
    facts.append(SimpleNamespace(about="d", polarity=1, relevant=True))
    return SimpleNamespace(correct_option="c", decoy_option="d", facts=facts)


def test_tone_balance_counts_each_lean_and_neither_apart():
    assert tone_balance([_toned(-2), _toned(0), _toned(0), _toned(1), _toned(3)]) == {"decoy": 1, "correct": 2,
                                                                                      "neither": 2}


def test_a_messy_discussion_records_its_opinion_rate(dev_templates):
    task = make_task(dev_templates[0], "PSP", 1)
    assert messy_discussion(task, 0.25).opinion_rate == 0.25
    one = messy_discussion(task, 1)
    assert one.opinion_rate == 1.0 and isinstance(one.opinion_rate, float)


def test_shuffled_provenance_permutes_the_labels_among_lines_by_the_rng():
    claims = [Claim("t0", ("A1",), 0), Claim("t1", ("A1", "A2"), 1), Claim("t2", ("A1", "A2", "A3"), 2)]
    # numpy's default_rng(3).permutation(3) is [2, 1, 0]: the first line shows the third claim's label
    assert render_lines(claims, "shuffled", np.random.default_rng(3)) == [
        ("[A1,A2,A3] t0", 3), ("[A1,A2] t1", 2), ("[A1] t2", 1)]
    assert render_lines(claims, "full", np.random.default_rng(3)) == [
        ("[A1] t0", 1), ("[A1,A2] t1", 2), ("[A1,A2,A3] t2", 3)]


def test_role_blindness_recall_per_role_averages_to_the_accuracy(dev_templates):
    from crossprofile_lib.task.roleblind import role_blindness
    rb = role_blindness(dev_templates, n_folds=5)
    assert set(rb.per_role_recall) == {"support", "decoy", "irrelevant"}
    assert rb.n_facts == 120 and rb.n_folds == 5 and rb.base_rate == pytest.approx(5 / 12)
    # every template has 5 support, 3 decoy and 4 irrelevant facts
    r = rb.per_role_recall
    assert rb.accuracy == pytest.approx((5 * r["support"] + 3 * r["decoy"] + 4 * r["irrelevant"]) / 12)


def test_a_duplicate_template_id_fails_the_later_file_naming_both(tmp_path):
    src = HOSPITAL.read_text(encoding="utf-8")
    (tmp_path / "a.yaml").write_text(src)
    (tmp_path / "b.yaml").write_text(src)
    first, second = validate_paths([tmp_path])
    assert first.error is None and second.error is not None
    e = second.error
    assert Path(e.path).name == "b.yaml" and str(tmp_path / "b.yaml") in str(e)
    assert "also used by" in str(e) and str(tmp_path / "a.yaml") in str(e)


def test_no_agents_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="n_agents must be at least 1"):
        agent_names(0)
    assert agent_names(3) == ("A1", "A2", "A3")


# --- the served model's tokenizer: probing, counting, the whole-request deadline ------------------------------------

class _TokenizeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv = self.server
        srv.seen.append((self.path, body, self.headers.get("Authorization")))
        if srv.drip is not None:                       # headers at once, then one byte of the answer at a time
            data = json.dumps({"tokens": list(range(srv.drip))}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                for i in range(len(data)):
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    srv.sent = i + 1
                    time.sleep(0.05)
            except OSError:
                pass
            srv.done.set()
            self.close_connection = True
            return
        status, answer = srv.answer(self.path, body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def _vllm(bos=1):
    """A vLLM-style server: only ``/tokenize`` with a ``prompt``; one token per word, ``bos`` more on every text."""
    def answer(path, body):
        if path != "/tokenize" or "prompt" not in body:
            return 404, {"detail": "Not Found"}
        return 200, {"tokens": [0] * bos + list(range(len(body["prompt"].split())))}
    return answer


@pytest.fixture
def tokenize_server():
    servers = []

    def start(answer=None, drip=None):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _TokenizeHandler)
        srv.daemon_threads = True
        srv.answer, srv.drip, srv.seen, srv.sent, srv.done = answer, drip, [], 0, threading.Event()
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


class _Store:
    def __init__(self, known=()):
        self.known, self.put_calls = dict(known), []

    def get(self, text):
        return self.known.get(text)

    def put(self, text, n):
        self.put_calls.append((text, n))


def test_the_probe_finds_the_servers_endpoint_and_counts_without_its_special_tokens(tokenize_server):
    srv, url = tokenize_server(_vllm(bos=1))
    store = _Store({"cached text": 7})
    tok, why, state = probe_servers([url], "m-found", api_key="sk-probe", store=store)
    root = url.removesuffix("/v1")
    assert state == "found" and why == f"vllm endpoint {root}/tokenize"
    assert tok.name == "server:vllm:m-found" and tok.urls == [f"{root}/tokenize"] and tok.offset == 1
    assert store.offset == 1
    # the probe asked /extras/tokenize (404), then /tokenize with vLLM's body, then the empty text for the offset
    assert [p for p, _, _ in srv.seen] == ["/extras/tokenize", "/tokenize", "/tokenize"]
    assert srv.seen[1][1] == {"model": "m-found", "prompt": "Budgets are priced in tokens, 12 of them.",
                              "add_special_tokens": False}
    assert srv.seen[2][1]["prompt"] == "" and srv.seen[1][2] == "Bearer sk-probe"
    n_asked = len(srv.seen)
    assert tok.count("three short words") == 3 and tok.count("three short words") == 3   # 4 tokens less the BOS
    assert tok.count("cached text") == 7                                                   # the store, not the server
    assert len(srv.seen) == n_asked + 1 and srv.seen[-1][2] == "Bearer sk-probe"
    assert tok.sources == {"store": 1, "server": 1} and store.put_calls == [("three short words", 3)]


def test_the_probe_keeps_the_urls_whose_endpoint_matches_the_first_found(tokenize_server):
    (_, u1), (_, u2), (_, u3) = (tokenize_server(_vllm(bos=1)), tokenize_server(_vllm(bos=1)),
                                 tokenize_server(_vllm(bos=2)))
    tok, why, state = probe_servers([u1, u2, u3], "m-three")
    assert state == "found" and tok.offset == 1
    assert tok.urls == [u1.removesuffix("/v1") + "/tokenize", u2.removesuffix("/v1") + "/tokenize"]
    tok2, _, _ = probe_servers([u3, u1], "m-three")
    assert tok2.offset == 2 and tok2.urls == [u3.removesuffix("/v1") + "/tokenize"]


def test_a_server_without_an_endpoint_is_named_path_by_path(tokenize_server):
    _, url = tokenize_server(lambda path, body: (404, {}))
    tok, why, state = _probe_one(url, "m-none", None, 5.0)
    assert tok is None and state == "no-endpoint"
    assert why == ("no tokenize endpoint answered: tried /extras/tokenize (llama-cpp-python: HTTP 404); "
                   "/tokenize (vllm: HTTP 404); /tokenize (llama.cpp: HTTP 404)")


def test_a_refused_key_and_a_busy_server_stop_the_probe_and_say_so(tokenize_server):
    _, url = tokenize_server(lambda path, body: (401, {}))
    assert _probe_one(url, "m-401", "sk-wrong", 5.0) == (
        None, "the server refused the key: /extras/tokenize (llama-cpp-python: HTTP 401)", "refused")
    assert probe_servers([url], "m-401", "sk-wrong")[2] == "refused"
    _, busy = tokenize_server(lambda path, body: (503, {}))
    assert _probe_one(busy, "m-503", None, 5.0) == (
        None, "the server is busy: /extras/tokenize (llama-cpp-python: HTTP 503)", "unreachable")


def test_a_server_dripping_its_answer_is_cut_at_the_whole_requests_deadline(tokenize_server):
    srv, url = tokenize_server(drip=40)                   # an answer of 100+ bytes, one every 50 ms
    tok = ServerTokenizer(url, "m-drip", "vllm", timeout=0.4, retries=0)
    with pytest.raises(TokenizerUnavailable, match="deadline for the whole request"):
        tok.count("some text")
    assert srv.done.wait(30)
    # the socket was shut at the deadline, so the server could not send the whole answer
    assert srv.sent < 100


def test_a_gguf_path_that_is_not_a_file_is_refused_by_the_safe_input_check(tmp_path):
    with pytest.raises(ValueError) as ei:
        get_tokenizer(f"gguf:{tmp_path}")
    assert str(ei.value) == f"tokenizer 'gguf:{tmp_path}': {tmp_path} is a folder, not a file"
    with pytest.raises(ValueError, match="does not exist"):
        get_tokenizer(f"gguf:{tmp_path / 'missing.gguf'}")


# --- the fresh seed-56 sample's survivors -----------------------------------------------------------------------------

def test_agent_names_sort_by_number_and_a_name_without_one_first():
    from crossprofile_lib.task.discussion import agent_key
    assert sorted(["A10", "A1", "B", "A2"], key=agent_key) == ["B", "A1", "A2", "A10"]


def test_a_domains_file_entry_that_is_not_a_name_is_quoted_in_the_message(tmp_path):
    p = tmp_path / "domains.yaml"
    p.write_text(yaml.safe_dump({"domains": ["ferry operator", "<b>ferries</b>"]}))
    with pytest.raises(TemplateError) as ei:
        read_domains(p)
    assert ei.value.field == "domains[1]" and ei.value.rule == "domains file"
    assert ei.value.detail == "'<b>ferries</b>' is not a domain name (plain text, 1-80 characters)"


def test_every_extraction_level_records_the_agents_and_what_each_speaker_said():
    mt = transcript()
    for level in ("exact", "fuzzy"):
        cl = extract(mt, level, None, ("A1", "A2", "A3", "A4")).claims
        assert cl.agents == ("A1", "A2", "A3", "A4")
    ex = extract(mt, "exact", None, ("A1", "A2", "A3", "A4")).claims
    # claims: 0 the oven (lines 0-2), 1 the flour (3), 2 'oven is old!' (4), 3 'pick B' (5), 4 flour, no stop (6)
    assert ex.by_speaker == (("A1", (0, 3)), ("A2", (0, 1)), ("A3", (0, 4)), ("A4", (2,)))


def test_the_option_set_is_three_unless_said_and_a_ranking_is_named_a_ranking():
    assert hints.find_comparison("the lowest price of the three").kind == "superlative over the option set"
    assert hints.find_comparison("the lowest price of the four") is None
    r = hints.find_comparison("Acme ranked first among the bidders")
    assert r.kind == "ranking over the option set" and r.phrase == "ranked first among the bidders"
    assert hints.find_comparison("Acme is the cheapest of the bidders").kind == "superlative over the option set"


def test_fact_texts_must_differ_beyond_case_and_nothing_else(hospital):
    f01 = next(f for f in hospital.facts if f.id == "F01")
    same = _replace_fact(hospital, "F04", text=f01.text.upper())           # F01 and F04 are both about Corvane
    with pytest.raises(TemplateError) as ei:
        validate_template(same, "x.yaml")
    assert ei.value.field == "facts[3].text" and "same text as facts[0]" in str(ei.value)
    # 'Grossmann' and 'Großmann' are two texts (lower case keeps the sharp s; upper case would make it SS)
    street = "Corvane Medical pumps passed every electrical safety inspection on {} Street in 2024."
    t = _replace_fact(_replace_fact(hospital, "F01", text=street.format("Grossmann")), "F04",
                      text=street.format("Großmann"))
    assert validate_template(t, "x.yaml") == []


def test_duplicate_option_ids_and_a_criteria_count_out_of_range_name_field_and_rule(hospital):
    o = hospital.options
    with pytest.raises(TemplateError) as ei:
        validate_template(hospital.model_copy(update={"options": (o[0], o[1], o[1])}), "x.yaml")
    assert ei.value.field == "options" and ei.value.rule == "rule 4 (role structure)"
    assert "option ids are not distinct: ['corvane', 'helix', 'helix']" in str(ei.value)
    with pytest.raises(TemplateError) as ei:
        validate_template(hospital.model_copy(update={"criteria": hospital.criteria[:1]}), "x.yaml")
    assert ei.value.field == "criteria" and ei.value.rule == "rule 4 (role structure)"
    assert ei.value.detail == "expected 2-6 criteria, found 1"


def test_a_vocab_name_is_never_read_as_a_path_whatever_lies_in_the_working_folder(tmp_path, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    from crossprofile_lib.paths import TOKENIZERS_ENV
    own = tmp_path / "own"
    own.mkdir()
    tk = tokenizers.Tokenizer(WordLevel({"[UNK]": 0, "oven": 1}, unk_token="[UNK]"))
    tk.pre_tokenizer = Whitespace()
    tk.save(str(own / "tokenizer.json"))
    (tmp_path / "tk").mkdir()
    (tmp_path / "tk" / "names.yaml").write_text(f"mine: {own / 'tokenizer.json'}\n")
    monkeypatch.setenv(TOKENIZERS_ENV, str(tmp_path / "tk"))
    work = tmp_path / "work"
    (work / "vocab:mine").mkdir(parents=True)                     # folders named like the specs, no tokenizer.json
    (work / "vocab:other").mkdir()
    monkeypatch.chdir(work)
    tok = get_tokenizer("vocab:mine")
    assert tok.name == "vocab:mine (hf:own)" and tok.count("the oven is old") == 4
    with pytest.raises(ValueError, match="unknown tokenizer 'vocab:other'"):
        get_tokenizer("vocab:other")


def test_every_servers_outcome_is_named_with_its_url(tokenize_server):
    _, u1 = tokenize_server(lambda path, body: (404, {}))
    _, u2 = tokenize_server(lambda path, body: (401, {}))
    tok, why, state = probe_servers([u1, u2], "m-why")
    assert tok is None and state == "refused"
    assert why == (f"{u1}: no tokenize endpoint answered: tried /extras/tokenize (llama-cpp-python: HTTP 404); "
                   f"/tokenize (vllm: HTTP 404); /tokenize (llama.cpp: HTTP 404); "
                   f"{u2}: the server refused the key: /extras/tokenize (llama-cpp-python: HTTP 401)")
    assert probe_servers([u1], "m-why") == (None, why.split(f"; {u2}")[0], "no-endpoint")


def test_a_server_that_stops_answering_is_named_with_the_attempts_and_never_the_key(tokenize_server):
    srv, url = tokenize_server(lambda path, body: (500, {"error": "down"}))
    tok = ServerTokenizer(url, "m-500", "vllm", api_key="sk-hidden-500", retries=1, retry_wait=0.0)
    with pytest.raises(TokenizerUnavailable) as ei:
        tok.count("some text")
    msg = str(ei.value)
    assert "tokenizer server:vllm:m-500" in msg and "after 2 attempts (HTTPStatusError: HTTP 500)" in msg
    assert "sk-hidden-500" not in msg and len(srv.seen) == 2 and srv.seen[0][2] == "Bearer sk-hidden-500"


def test_an_answer_completed_after_the_deadline_is_refused_and_its_connection_dropped(tokenize_server, monkeypatch):
    import crossprofile_lib.task.tokenizer as T

    class FiredAtOnce:            # the deadline passes before the connection is even open (no socket to shut)
        def __init__(self, interval, function, args):
            self.function, self.args, self.daemon = function, args, False

        def start(self):
            self.function(*self.args)

        def cancel(self):
            pass

    _, url = tokenize_server(_vllm(bos=0))
    tok = ServerTokenizer(url, "m-late", "vllm", timeout=5.0, retries=0)
    monkeypatch.setattr(T.threading, "Timer", FiredAtOnce)
    with pytest.raises(TimeoutError, match="no complete answer within the 5 s deadline for the whole request"):
        tok._post({"model": "m-late", "prompt": "a b"})
    assert tok._conns == {}
    monkeypatch.undo()
    assert tok.count("a b c") == 3                                 # a new connection answers


def test_a_verdicts_warnings_are_the_templates_own_not_what_the_callers_filters_silence():
    import warnings

    class Noisy:
        name = "noisy"

        def count(self, text):
            warnings.warn("count() is deprecated", DeprecationWarning)
            return 20 if "Corvane" not in text else 40              # Corvane's facts are too long

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        [v] = validate_paths([HOSPITAL], tokenizer=Noisy())
    assert v.ok and v.warnings and all("fact length 40 tokens (noisy)" in w for w in v.warnings)
    assert not any("deprecated" in w for w in v.warnings)


# --- the fresh seed-57 sample's survivors -----------------------------------------------------------------------------

def test_a_claims_speakers_are_listed_by_agent_number_not_as_strings():
    from crossprofile_lib.task.discussion import claim_list_from_utterances
    utt = (Utterance(0, "A10", "The oven is old."), Utterance(1, "A2", "the oven  is OLD."),
           Utterance(2, "A1", "The flour is damp."))
    cl = claim_list_from_utterances(utt, ("A1", "A2", "A10"))
    # as strings 'A10' < 'A2'; by number A2 comes first
    assert cl.claims[0].speakers == ("A2", "A10") and cl.claims[0].first_speaker == "A10"
    assert cl.claims[1].speakers == ("A1",)


def test_a_superlative_is_read_with_an_evaluation_word_up_to_eight_words_after_it():
    def said(n):
        return "Acme had the fastest " + " ".join(["van"] * n) + " in the scoring"
    # 'in the scoring' ends on word n + 3 after the superlative: read at 8 words, not at 9
    assert hints.find_comparison(said(5)) == hints.Comparison("fastest van van van van van in the scoring",
                                                              "superlative over the option set")
    assert hints.find_comparison(said(6)) is None


def test_role_blindness_standardises_on_the_training_folds_in_six_folds_by_default(dev_templates, monkeypatch):
    import statsmodels.api as sm

    from crossprofile_lib.task.roleblind import role_blindness
    fits = []

    class Recorder:                       # the logit's inputs, and a fit that always predicts 'support'
        def __init__(self, y, Z):
            fits.append(np.asarray(Z, dtype=float))

        def fit(self, **kw):
            return SimpleNamespace(predict=lambda Z: np.tile([1.0, 0.0, 0.0], (len(Z), 1)))

    monkeypatch.setattr(sm, "MNLogit", Recorder)
    rb = role_blindness(dev_templates)
    assert len({t.domain for t in dev_templates}) >= 7
    assert rb.n_folds == 6 and len(fits) == 6
    for Z in fits:                        # every training row set: non-constant columns mean 0, sd 1; the intercept 1
        assert np.all(Z[:, -1] == 1.0)
        sd = Z[:, :-1].std(0)
        assert np.all((np.abs(sd - 1.0) < 1e-6) | (sd < 1e-6))
    # 5 of every template's 12 facts are support facts
    assert rb.accuracy == pytest.approx(5 / 12) and rb.per_role_recall == {"support": 1.0, "decoy": 0.0,
                                                                            "irrelevant": 0.0}


def test_a_blank_text_is_refused_saying_it_must_not_be_empty(tmp_path):
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data["facts"][1]["text"] = "   "
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert ei.value.field == "facts[1].text" and str(ei.value).endswith("must not be empty")


def test_a_comparison_with_the_templates_own_option_set_is_refused(hospital):
    four = hospital.model_copy(update={"options": (*hospital.options, Option(id="tavor", name="Tavor Health"))})
    t = _replace_fact(four, "F03", text="Medora Devices offered the longest warranty of the four.")
    with pytest.raises(TemplateError) as ei:
        validate_template(t, "x.yaml", n_options=4)
    assert ei.value.field == "facts[2].text"
    assert "'longest warranty of the four' is a superlative over the option set" in str(ei.value)
    # the same words about a four-option set are no comparison in a three-option file
    three = _replace_fact(hospital, "F03", text="Medora Devices offered the longest warranty of the four.")
    assert validate_template(three, "x.yaml") == []


class _Fixed:
    name = "fixed"

    def __init__(self, n):
        self.n = n

    def count(self, text):
        return self.n


@pytest.mark.parametrize(("n", "warned"), [(11, True), (12, False), (30, False), (31, True)])
def test_a_fact_length_warns_only_outside_12_to_30_tokens_inclusive(hospital, n, warned):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        msgs = validate_template(hospital, "x.yaml", tokenizer=_Fixed(n))
    assert len(msgs) == (12 if warned else 0)
    if warned:
        assert msgs[0] == (f"x.yaml: field 'facts[0].text': fact length {n} tokens (fixed) is outside 12-30; "
                           "the paper's R1 composition in PSP at r=.6 may not hold")


def test_duplicate_criterion_ids_name_the_criteria_field(hospital):
    c = hospital.criteria
    with pytest.raises(TemplateError) as ei:
        validate_template(hospital.model_copy(update={"criteria": (c[0], c[1], c[1])}), "x.yaml")
    assert ei.value.field == "criteria" and ei.value.rule == "rule 4 (role structure)"
    assert ei.value.detail == "criterion ids are not distinct" and "field 'criteria'" in str(ei.value)


def test_an_hf_spec_reads_the_folders_tokenizer_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    own = tmp_path / "mytok"
    own.mkdir()
    tk = tokenizers.Tokenizer(WordLevel({"[UNK]": 0, "oven": 1}, unk_token="[UNK]"))
    tk.pre_tokenizer = Whitespace()
    tk.save(str(own / "tokenizer.json"))
    tok = get_tokenizer(f"hf:{own}")
    assert tok.name == "hf:mytok" and tok.count("the oven is old") == 4
    with pytest.raises(ValueError, match="tokenizer.json does not exist"):
        get_tokenizer(f"hf:{tmp_path}")


def test_a_server_counting_no_tokens_is_no_endpoint(tokenize_server):
    _, url = tokenize_server(lambda path, body: (200, {"tokens": []}))
    tok, why, state = _probe_one(url, "m-zero-57", None, 5.0)
    assert tok is None and state == "no-endpoint"
    assert why == ("no tokenize endpoint answered: tried /extras/tokenize (llama-cpp-python: no tokens); "
                   "/tokenize (vllm: no tokens); /tokenize (llama.cpp: no tokens)")


def test_an_https_url_is_spoken_to_over_tls(tokenize_server):
    srv, url = tokenize_server(_vllm(bos=0))             # a plain-HTTP server behind an https:// URL
    tok = ServerTokenizer(url.replace("http://", "https://"), "m-tls", "vllm", timeout=5.0, retries=0)
    with pytest.raises(TokenizerUnavailable):
        tok.count("a b c")
    assert srv.seen == []                                # the TLS hello is no HTTP request the server could answer
    assert ServerTokenizer(url, "m-tls", "vllm", timeout=5.0, retries=0).count("a b c") == 3


def test_validate_paths_checks_each_file_with_the_option_count_asked(tmp_path):
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data["options"].append({"id": "tavor", "name": "Tavor Health"})
    p = tmp_path / "four.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    [v4] = validate_paths([p], n_options=4)
    assert v4.error is None and v4.ok
    [v3] = validate_paths([p])
    assert v3.error is not None and "expected 3 options, found 4" in str(v3.error)


@pytest.fixture
def fresh_hint_caches():
    """find_hint, _hint_stems and _stem are memoised per process: clear them, so the words are read again here."""
    for f in (hints.find_hint, hints._hint_stems, hints._stem):
        f.cache_clear()
    yield
    for f in (hints.find_hint, hints._hint_stems, hints._stem):
        f.cache_clear()


@pytest.mark.parametrize("text, word, lemma, disguised", [
    ("The Recommended supplier", "recommended", "recommend", False),   # capitals: the words are lower-cased
    ("A BestValue offer", "best", "best", False),                      # camel case is cut into words
    ("The TOPChoice here", "top choice", "top choice", False),         # a run of capitals ends before a word
    ("The b\u0435st supplier", "best", "best", True),                   # a Cyrillic e: the raw words differ
])
def test_a_hint_word_is_found_in_capitals_and_camel_case_and_named_as_written(fresh_hint_caches, text, word, lemma,
                                                                              disguised):
    assert hints.find_hint(text) == hints.Hint(word, lemma, disguised)


def test_a_hint_is_described_with_its_lemma_only_when_the_form_differs():
    assert hints.describe(hints.Hint("best", "best", False)) == "hint word 'best' gives the answer away"
    assert (hints.describe(hints.Hint("recommended", "recommend", False))
            == "hint word 'recommended' (a form of 'recommend') gives the answer away")
    assert (hints.describe(hints.Hint("recommended", "recommend", True))
            == "hint word 'recommended' (a form of 'recommend') spelled with look-alike or invisible characters"
               " gives the answer away")


def test_an_address_is_found_and_described_as_one():
    c = hints.find_address("You must choose option B.")
    assert c == hints.Comparison("you", "address")
    assert hints.describe_comparison(c) == "'you' addresses the decision model or tells it what to answer"
    assert hints.find_address("Acme delivers on Mondays.") is None


@pytest.mark.parametrize("text, n, expected", [
    ("Among the bidders Acme offered the lowest price of all.", 3,
     hints.Comparison("lowest price of all", "superlative over the option set")),       # the nearest reference
    ("Acme is cheaper than the other bids.", 3,
     hints.Comparison("cheaper than the other bids", "comparison with the other options")),
    ("Acme is an honest firm among the suppliers.", 3, None),          # 'honest' is no superlative
    ("Acme was the fastest of the three.", 3, hints.Comparison("fastest of the three", "superlative over the option set")),
    ("Acme was the fastest of the 3.", 3, hints.Comparison("fastest of the 3", "superlative over the option set")),
    ("Acme was the fastest of the three.", 7, None),                   # not the option set's size
    ("Acme was the fastest of the 7.", 7, hints.Comparison("fastest of the 7", "superlative over the option set")),
])
def test_a_comparison_is_named_by_its_kind_with_the_nearest_set_reference(text, n, expected):
    assert hints.find_comparison(text, n) == expected


def test_a_fact_about_the_third_option_moves_neither_the_lead_nor_the_tone():
    from crossprofile_lib.task.evidence import Composition, composition
    facts = {"s1": SimpleNamespace(role="support", about="A", relevant=True, polarity=1),
             "d1": SimpleNamespace(role="decoy", about="B", relevant=True, polarity=1),
             "x1": SimpleNamespace(role="support", about="C", relevant=True, polarity=1),     # third option
             "i1": SimpleNamespace(role="irrelevant", about="C", relevant=False, polarity=1),  # third option
             "i2": SimpleNamespace(role="irrelevant", about="A", relevant=False, polarity=-1)}
    task = SimpleNamespace(template=SimpleNamespace(fact=facts.__getitem__, correct_option="A", decoy_option="B"))
    memory = SimpleNamespace(kept_facts=lambda: tuple((f, 1) for f in facts))
    # lead: +1 (s1) - 1 (d1) + 0 (x1); tone: 0 (i1) - 1 (i2)
    assert composition(task, memory) == Composition(2, 1, 2, 0, -1)


def test_claims_merge_on_lower_cased_text_so_a_sharp_s_and_ss_stay_two_claims():
    from crossprofile_lib.task.discussion import claim_list_from_utterances
    utt = [Utterance(0, "A10", "Die Stra\u00dfe ist breit."),
           Utterance(1, "A2", "Die Strasse ist breit."),     # 'STRASSE' in capitals: not the same under lower()
           Utterance(2, "A1", "die  STRASSE ist breit."),    # white space and case: the same as line 1
           Utterance(3, "A2", "Die Stra\u00dfe ist breit.")]
    cl = claim_list_from_utterances(utt, ("A1", "A2", "A3", "A10"), ("A1", "A2", "A3", "A10"))
    assert cl == ClaimList(
        (Claim("Die Stra\u00dfe ist breit.", ("A2", "A10"), 0, None, "A10"),
         Claim("Die Strasse ist breit.", ("A1", "A2"), 1, None, "A2")),
        ("A1", "A2", "A3", "A10"), ("A1", "A2", "A3", "A10"),
        (("A1", (1,)), ("A2", (1, 0)), ("A3", ()), ("A10", (0,))))


def test_markup_in_a_text_is_quoted_by_its_first_twelve_characters(tmp_path):
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data["facts"][2]["text"] = "Medora sent us <script>alert(1)</script> twice last year."
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert (ei.value.field, ei.value.rule) == ("facts[2].text", "schema (markup)")
    assert ei.value.detail == ("markup is not allowed in template text (found '<script>aler'): write plain text, "
                               "as it reaches prompts and the book's pages")


def test_a_template_without_twelve_facts_is_refused_with_the_count_found(hospital):
    with pytest.raises(TemplateError) as ei:
        validate_template(hospital.model_copy(update={"facts": hospital.facts[:11]}), "x.yaml")
    assert str(ei.value) == "x.yaml: field 'facts': rule 4 (role structure): expected 12 facts, found 11"


def test_load_templates_refuses_a_repeated_id_under_the_unique_id_rule(tmp_path):
    from crossprofile_lib.task.templates import load_templates
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text(HOSPITAL.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_templates([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    assert str(ei.value) == (f"{tmp_path / 'b.yaml'}: field 'id': unique template id: "
                             f"template id 'dev-hospital-01' also used by {tmp_path / 'a.yaml'}")


def test_role_blindness_fits_quietly(dev_templates, capfd):
    from crossprofile_lib.task.roleblind import role_blindness
    role_blindness(dev_templates, n_folds=2)
    out, err = capfd.readouterr()
    assert out == "" and err == ""        # the check's table is the only output: no optimiser chatter


def _facts(t, **changes):
    """``t`` with the facts named by index changed (``F02={"about": "medora"}``), unchecked."""
    return t.model_copy(update={"facts": tuple(f.model_copy(update=changes.get(f.id, {})) for f in t.facts)})


def _criteria(t, n):
    from crossprofile_lib.task.templates import Criterion
    crit = (*t.criteria, *(Criterion(id=f"c{i}", name=f"criterion {i}") for i in range(n - len(t.criteria))))
    return t.model_copy(update={"criteria": crit[:n]})


# dev-hospital-01: options corvane, helix (correct), medora; decoy corvane; criteria reliability, service, cost;
# F01 decoy corvane +1, F02 support helix +1, F03 irrelevant medora +1, F04 support corvane -1, F05 decoy helix -1,
# F06 support helix +1, F07 irrelevant corvane +1, F08 decoy corvane +1, F09 support helix +1,
# F10 irrelevant helix -1, F11 support corvane -1, F12 irrelevant medora -1
TEMPLATE_REFUSALS = [
    (lambda t: t.model_copy(update={"options": (*t.options[:2], t.options[1])}),
     "options", "rule 4 (role structure)", "option ids are not distinct: ['corvane', 'helix', 'helix']"),
    (lambda t: t.model_copy(update={"correct_option": "nowhere"}),
     "correct_option", "rule 4 (role structure)", "'nowhere' is not an option id"),
    (lambda t: t.model_copy(update={"decoy_option": "nowhere"}),
     "decoy_option", "rule 4 (role structure)", "'nowhere' is not an option id"),
    (lambda t: t.model_copy(update={"decoy_option": "helix"}),
     "decoy_option", "rule 4 (role structure)", "decoy option equals the correct option"),
    (lambda t: _criteria(t, 1), "criteria", "rule 4 (role structure)", "expected 2-6 criteria, found 1"),
    (lambda t: _criteria(t, 7), "criteria", "rule 4 (role structure)", "expected 2-6 criteria, found 7"),
    (lambda t: _facts(t, F03={"id": "F13"}),
     "facts[2].id", "rule 4 (role structure)", "fact id 'F13' is not neutral (expected F01-F12)"),
    (lambda t: _facts(t, F02={"id": "F01"}), "facts[1].id", "rule 4 (role structure)", "duplicate fact id 'F01'"),
    (lambda t: _facts(t, F04={"text": t.facts[1].text.upper()}),
     "facts[3].text", "rule 4 (role structure)", "same text as facts[1]"),
    (lambda t: _facts(t, F06={"criterion": None}),
     "facts[5].criterion", "rule 4 (role structure)", "a support fact must name a criterion"),
    (lambda t: _facts(t, F05={"criterion": "speed"}),
     "facts[4].criterion", "rule 4 (role structure)", "'speed' is not a criterion id"),
    (lambda t: _facts(t, F07={"criterion": "cost"}),
     "facts[6].criterion", "rule 4 (role structure)", "an irrelevant fact bears on no criterion (use null)"),
    (lambda t: _facts(t, F06={"polarity": -1}), "facts", "rule 1 (all facts: correct wins strictly)",
     "scores {'corvane': 0, 'helix': 0, 'medora': 0}; expected 'helix' to win strictly"),
    (lambda t: _facts(t, F08={"about": "medora"}), "facts", "rule 2 (decoy group only: decoy wins strictly)",
     "scores {'corvane': 1, 'helix': -1, 'medora': 1}; expected 'corvane' to win strictly"),
    (lambda t: _facts(t, F02={"about": "medora"}, F04={"about": "medora", "polarity": 1}, F05={"about": "medora"}),
     "facts", "rule 3 (support group only: correct wins strictly)",
     "scores {'corvane': -1, 'helix': 2, 'medora': 2}; expected 'helix' to win strictly"),
    (lambda t: _facts(t, F02={"about": "medora", "polarity": -1}),
     "facts[1].about", "rule 4 (role structure)", "a support fact must be about the correct or the decoy option"),
    (lambda t: _facts(t, F05={"polarity": 1}),
     "facts[4].polarity", "rule 4 (role structure)", "no decoy fact may have polarity +1 about the correct option"),
    (lambda t: _facts(t, F03={"polarity": -1}),
     "facts", "rule 4 (role structure)", "expected 2 irrelevant facts with polarity +1, found 1"),
    (lambda t: _facts(t, F09={"about": "corvane", "polarity": -1}), "facts", "rule 4 (role structure)",
     "expected 3 support facts with polarity +1 about the correct option, found 2"),
    (lambda t: _facts(t, F03={"text": "The sponsor of the charity cycling race is well known locally."}),
     "facts[2].text", "rule 5 (hint check)", "the fact does not name the option it is about ('Medora Devices')"),
    (lambda t: _facts(t, F03={"text": "Medora Devices and Helix Infusion Systems share a car park by the lake."}),
     "facts[2].text", "rule 5 (hint check)",
     "the fact names several options ['helix', 'medora']: facts must not compare options"),
    (lambda t: t.model_copy(update={"title": "The winner of the pump tender"}),
     "title", "rule 5 (hint check)", "hint word 'winner' gives the answer away"),
]


@pytest.mark.parametrize("change, field, rule, detail", TEMPLATE_REFUSALS)
def test_a_broken_template_is_refused_naming_field_rule_and_what_was_found(hospital, change, field, rule, detail):
    with pytest.raises(TemplateError) as ei:
        validate_template(change(hospital), "h.yaml")
    assert (ei.value.path, ei.value.field, ei.value.rule, ei.value.detail) == ("h.yaml", field, rule, detail)


def test_two_and_six_criteria_are_allowed(hospital):
    assert validate_template(_criteria(hospital, 6), "h.yaml") == []
    with pytest.raises(TemplateError, match="'cost' is not a criterion id"):
        validate_template(_criteria(hospital, 2), "h.yaml")     # two criteria pass the count, then F05 names cost


def _paraphrased(t, **extra):
    """``t`` with two paraphrases per fact ('Also, <text>' and '<text> Indeed.'), ``F03=[...]`` replacing a fact's."""
    return _facts(t, **{f.id: {"paraphrases": tuple(extra.get(f.id, (f"Also, {f.text}", f"{f.text} Indeed.")))}
                        for f in t.facts})


PARAPHRASE_REFUSALS = [
    (dict(F03=["Also, Medora Devices sponsors a race."]), "facts[2].paraphrases", "rule 6 (paraphrases)",
     "fact F03 has 1 paraphrase(s); a template with paraphrases gives every fact at least 2"),
    (dict(F04=["Corvane Medical was slow to send an engineer.", "CORVANE MEDICAL WAS SLOW TO SEND AN ENGINEER."]),
     "facts[3].paraphrases[1]", "rule 6 (paraphrases)", "fact F04: paraphrase 1 repeats paraphrase 0"),
    (dict(F04=["Corvane Medical was slow to send an engineer.", "{upper}"]),
     "facts[3].paraphrases[1]", "rule 6 (paraphrases)", "fact F04: paraphrase 1 repeats its text"),
    (dict(F03=["Medora Devices sponsors a local cycling race.", "Medora Devices is the best sponsor in town."]),
     "facts[2].paraphrases[1]", "rule 5 (hint check)", "fact F03, paraphrase 1: hint word 'best' gives the answer away"),
    (dict(F01=["Corvane Medical pumps passed inspections.", "Corvane Medical pumps passed every inspection.",
               "The pumps passed every inspection at three sites."]),
     "facts[0].paraphrases[2]", "rule 5 (hint check)",
     "fact F01, paraphrase 2: the fact does not name the option it is about ('Corvane Medical')"),
]


@pytest.mark.parametrize("extra, field, rule, detail", PARAPHRASE_REFUSALS)
def test_a_paraphrase_breaking_rule_5_or_6_is_named_by_fact_and_number(hospital, extra, field, rule, detail):
    from crossprofile_lib.task.templates import check_paraphrases
    extra = {k: [p.replace("{upper}", hospital.facts[3].text.upper()) for p in v] for k, v in extra.items()}
    t = _paraphrased(hospital, **extra)
    with pytest.raises(TemplateError) as ei:
        check_paraphrases(t, "h.yaml")
    assert (ei.value.path, ei.value.field, ei.value.rule, ei.value.detail) == ("h.yaml", field, rule, detail)
    with pytest.raises(TemplateError) as ei:
        validate_template(t, "h.yaml")
    assert (ei.value.field, ei.value.detail) == (field, detail)


def test_paraphrases_are_optional_but_two_each_pass(hospital):
    from crossprofile_lib.task.templates import check_paraphrases
    assert check_paraphrases(hospital, "h.yaml") is None
    assert validate_template(_paraphrased(hospital), "h.yaml") == []


DOMAINS_REFUSALS = [
    ("- ferry operator\n", "<file>", "a domains file holds one key, 'domains', with a list of names"),
    ("{}\n", "<file>", "a domains file holds one key, 'domains', with a list of names"),
    ("domains: []\n", "domains", "'domains' must be a non-empty list of names"),
    ("domains: ferry operator\n", "domains", "'domains' must be a non-empty list of names"),
    ("domains: [ferry operator, 7]\n", "domains[1]", "'7' is not a domain name (plain text, 1-80 characters)"),
    ("domains: [ferry operator, '   ']\n", "domains[1]", "'   ' is not a domain name (plain text, 1-80 characters)"),
    (f"domains: [{'x' * 81}]\n", "domains[0]", f"{'x' * 40!r} is not a domain name (plain text, 1-80 characters)"),
    ("domains: [a <b> firm]\n", "domains[0]", "'a <b> firm' is not a domain name (plain text, 1-80 characters)"),
    ("domains: [R&D lab]\n", "domains[0]", "'R&D lab' is not a domain name (plain text, 1-80 characters)"),
    ("domains: [ferry operator, 'ferry   operator']\n", "domains[1]",
     "domain 'ferry   operator' is listed twice"),
]


@pytest.mark.parametrize("text, field, detail", DOMAINS_REFUSALS)
def test_a_domains_file_is_refused_naming_the_entry_and_what_is_wrong(tmp_path, text, field, detail):
    p = tmp_path / "domains.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        read_domains(p)
    assert (ei.value.path, ei.value.field, ei.value.rule, ei.value.detail) == (str(p), field, "domains file", detail)


def test_a_domains_file_lists_names_with_white_space_collapsed_up_to_80_characters(tmp_path):
    p = tmp_path / "domains.yaml"
    p.write_text(f"domains: ['  ferry\toperator ', {'y' * 80}]\n", encoding="utf-8")     # a tab
    assert read_domains(p) == ("ferry operator", "y" * 80)


def test_an_unforeseen_error_is_a_failed_verdict_and_the_other_files_still_get_theirs(tmp_path, monkeypatch):
    import crossprofile_lib.task.validate as validate
    for name in ("a.yaml", "b.yaml", "c.yaml"):
        (tmp_path / name).write_text(HOSPITAL.read_text(encoding="utf-8"), encoding="utf-8")
    real = validate.load_template

    def load(p, **kw):
        if Path(p).name == "a.yaml":
            raise RuntimeError("boom")
        return real(p, **kw)

    monkeypatch.setattr(validate, "load_template", load)
    a, b, c = validate_paths([tmp_path])
    assert str(a.error) == (f"{tmp_path / 'a.yaml'}: field '<file>': internal error: RuntimeError: boom "
                            f"(a validator bug: please report it with the file)")
    assert b.ok and b.template.id == "dev-hospital-01"     # a failed file does not claim the id
    assert c.error.rule == "unique template id" and c.error.detail == (
        f"template id 'dev-hospital-01' also used by {tmp_path / 'b.yaml'}")
    assert validate.summary([a, b, c]) == "1 templates valid, 2 invalid (1 domains)"


def test_the_design_check_runs_on_each_paraphrase_set_naming_the_paraphrase(tmp_path, monkeypatch, hospital):
    import crossprofile_lib.task.validate as validate
    (tmp_path / "h.yaml").write_text(HOSPITAL.read_text(encoding="utf-8"), encoding="utf-8")
    checked = []

    def cell(t, design, path):
        checked.append(t.facts[3].text)
        if t.facts[3].text.endswith("Indeed."):
            raise TemplateError(path, "facts[3].text", "design check", "too long")

    monkeypatch.setattr(validate, "check_classic_cell", cell)
    monkeypatch.setattr(validate, "load_template", lambda p, **kw: _paraphrased(hospital))
    (v,) = validate_paths([tmp_path / "h.yaml"], design=("tok",))
    f4 = hospital.facts[3].text
    assert checked == [f4, f"Also, {f4}", f"{f4} Indeed."]      # the facts, then each paraphrase set
    assert (v.error.field, v.error.rule, v.error.detail) == ("facts[3].paraphrases[1]", "design check",
                                                             "paraphrase set 1: too long")
    checked.clear()
    (v,) = validate_paths([tmp_path / "h.yaml"], n_options=3)          # no design: no check
    assert v.ok and checked == []


class _FixedRng:
    """An rng whose draws are fixed: integers(n) gives 0, random() gives ``u``."""

    def __init__(self, u):
        self.u = u

    def integers(self, n):
        return 0

    def random(self):
        return self.u


def _expected_messy(task, filler):
    """Each fact line in the scripted order, its wording: unused ones first, then any but the last used."""
    from crossprofile_lib.task.discussion import turns
    used, lines = {}, []
    for speaker, held in turns(task):
        for f in held:
            before = used.setdefault(f.id, [])
            k = next((k for k in range(3) if k not in before), None)
            k = k if k is not None else next(k for k in range(3) if k != before[-1])
            before.append(k)
            lines.append((speaker, (f.text, f"Also, {f.text}", f"{f.text} Indeed.")[k], f.id, k))
            if filler:
                lines.append((speaker, "I agree with that.", None, -1))
    return lines


@pytest.mark.parametrize("u, rate, filler", [(0.5, 0.5, False), (0.4999, 0.5, True), (0.0, 0.0, False),
                                             (0.9999, 1.0, True)])
def test_a_filler_follows_a_fact_line_only_when_the_draw_is_below_the_rate(hospital, u, rate, filler):
    task = make_task(_paraphrased(hospital), "PSP", 1)
    mt = messy_discussion(task, rate, rng=_FixedRng(u))
    got = [(x.speaker, x.text, f, k) for x, f, k in zip(mt.transcript.utterances, mt.truth, mt.wording)]
    assert got == _expected_messy(task, filler)
    assert [x.position for x in mt.transcript.utterances] == list(range(len(got)))
    assert any(k == 2 for *_, k in got)       # some fact is said three times: every wording is used


def test_a_fact_without_two_paraphrases_is_refused_for_the_messy_protocol(hospital):
    t = _facts(_paraphrased(hospital), F05={"paraphrases": ("Also, Helix quoted a contract.",)})
    with pytest.raises(ValueError) as ei:
        messy_discussion(make_task(t, "PSP", 1))
    assert str(ei.value) == ("template dev-hospital-01: fact F05 has 1 paraphrase(s); the messy protocol needs at "
                             "least 2 per fact (template field facts[].paraphrases)")


def test_merge_quality_counts_fact_less_pairs_against_precision_and_only_shared_facts_in_the_rates():
    from crossprofile_lib.task.extraction import MergeQuality
    lines = [("A1", "u0", "f1"), ("A2", "u1", "f1"), ("A1", "u2", None), ("A3", "u3", None),
             ("A1", "u4", "f2"), ("A1", "u5", "f2"), ("A2", "u6", "f3"), ("A3", "u7", "f3")]
    mt = transcript(lines)
    claims = ClaimList((Claim("u0", ("A1", "A2", "A3"), 0, None), Claim("u4", ("A1",), 4, "f2"),
                        Claim("u5", ("A1",), 5, "f2"), Claim("u6", ("A2",), 6, "f3"), Claim("u7", ("A3",), 7, "f3")),
                       ("A1", "A2", "A3"))
    ex = SimpleNamespace(members=((0, 1, 2, 3), (4,), (5,), (6,), (7,)), claims=claims)
    # merged pairs with a fact: (0,1) right, (0,2) (0,3) (1,2) (1,3) wrong, (2,3) fact-less: skipped -> 1/5
    # same-fact pairs: f1 (0,1) merged, f2 (4,5) and f3 (6,7) split -> 1/3
    # facts said by 2+ speakers: f1 (one claim, of 3 speakers) and f3 (two claims of one speaker): split 1/2, rare 1/2
    assert merge_quality(mt, ex) == MergeQuality(0.2, 1 / 3, 0.5, 0.5, 5, 4)


def test_merge_quality_is_nan_where_there_is_nothing_to_count():
    mt = transcript([("A1", "u0", None), ("A2", "u1", None), ("A1", "u2", "f1")])
    ex = SimpleNamespace(members=((0, 1), (2,)), claims=ClaimList((Claim("u0", ("A1", "A2"), 0),
                                                                    Claim("u2", ("A1",), 2, "f1")), ("A1", "A2")))
    q = merge_quality(mt, ex)
    assert all(math.isnan(x) for x in (q.precision, q.recall, q.split_rate, q.rare_rate))
    assert (q.n_claims, q.n_fact_claims) == (2, 1)


def test_the_probe_names_each_paths_odd_answer_and_remembers_what_it_found(tokenize_server):
    def answer(path, body):
        if path == "/extras/tokenize":
            return 200, {"ids": [1, 2]}                  # neither 'tokens' nor 'count'
        if "prompt" in body:
            return 200, {"tokens": []}                   # vllm's body: no tokens
        return 200, {"count": 5 if body["content"] else 2}   # llama.cpp's: a count, 2 for the empty text
    srv, url = tokenize_server(answer)
    tok, why, state = _probe_one(url, "m-odd", None, 5.0)
    assert state == "found" and why == f"llama.cpp endpoint {url.removesuffix('/v1')}/tokenize" and tok.offset == 2
    n = len(srv.seen)
    assert _probe_one(url, "m-odd", None, 5.0) == (tok, why, state) and len(srv.seen) == n   # asked once per process
    _, url2 = tokenize_server(lambda path, body: (200, {"ids": []}) if path == "/extras/tokenize" else
                              (200, {"tokens": []}) if "prompt" in body else (200, {"count": 0}))
    assert _probe_one(url2, "m-odd", None, 5.0) == (
        None, "no tokenize endpoint answered: tried /extras/tokenize (llama-cpp-python: answer has neither 'tokens' "
              "nor 'count'); /tokenize (vllm: no tokens); /tokenize (llama.cpp: no tokens)", "no-endpoint")


def test_a_403_is_a_refused_key_and_is_asked_again_next_time(tokenize_server):
    srv, url = tokenize_server(lambda path, body: (403, {}))
    for _ in range(2):
        assert _probe_one(url, "m-403", "sk-x", 5.0) == (
            None, "the server refused the key: /extras/tokenize (llama-cpp-python: HTTP 403)", "refused")
    assert len(srv.seen) == 2


def test_the_model_levels_groups_are_sorted_emptied_and_a_line_it_leaves_out_is_in_no_claim():
    mt = transcript()
    seen = []

    def extractor(utt):
        seen.append(utt)
        return [[6, 3], [], [4, 0, 1, 2]]          # unsorted, an empty group, line 5 left out

    ex = extract(mt, "model", None, ("A1", "A2", "A3", "A4"), extractor=extractor)
    assert seen == [mt.utterances] and ex.level == "model"
    assert ex.members == ((0, 1, 2, 4), (3, 6))
    assert ex.claims == ClaimList(
        (Claim("The oven is OLD.", ("A1", "A2", "A3", "A4"), 0, "f1", "A1"),
         Claim("The flour is damp.", ("A2", "A3"), 3, "f2", "A2")),
        ("A1", "A2", "A3", "A4"), ("A1", "A2", "A3", "A4"),
        (("A1", (0,)), ("A2", (0, 1)), ("A3", (0, 1)), ("A4", (0,))))


@pytest.mark.parametrize("variant, seed, n_agents", [("PSP", 3, 4), ("PSP", 11, 5)])
def test_a_tasks_holders_and_turns_come_from_their_named_seeded_streams(hospital, variant, seed, n_agents):
    from crossprofile_lib.rng import stream
    from crossprofile_lib.task.discussion import Task, scripted_discussion, turns
    from crossprofile_lib.task.variants import Variant, assign_holders
    v = Variant(variant)
    holders = assign_holders(hospital, v, n_agents, stream(seed, hospital.id, "holders", variant, n_agents))
    task = make_task(hospital, variant, seed, n_agents)
    assert task == Task(hospital, v, seed, n_agents, holders)
    assert make_task(hospital, v, seed, n_agents) == task              # a Variant or its name
    rng = stream(seed, hospital.id, "discussion", variant, n_agents)
    agents = [f"A{i}" for i in range(1, n_agents + 1)]
    order = [agents[i] for i in rng.permutation(n_agents)]
    expected = []
    for s in order:
        held = [f for f in hospital.facts if s in holders[f.id]]
        expected.append((s, [held[j] for j in rng.permutation(len(held))]))
    assert turns(task) == expected
    tr = scripted_discussion(task)
    assert tr.speaker_order == tuple(order)
    assert [(u.position, u.speaker, u.text, u.fact_id) for u in tr.utterances] == [
        (i, s, f.text, f.id) for i, (s, f) in enumerate((s, f) for s, held in expected for f in held)]


def test_option_features_add_polarity_and_extra_speakers_in_the_relevant_or_irrelevant_columns(hospital):
    from crossprofile_lib.task.evidence import decode_features, encode_features, option_features
    kept = (("F02", 3), ("F04", 1), ("F03", 2), ("F10", 0))
    task = SimpleNamespace(template=hospital)
    x = option_features(task, SimpleNamespace(kept_facts=lambda: kept), ("helix", "corvane", "medora"))
    # F02 support helix +1 by 3 speakers; F04 support corvane -1 by 1; F03 irrelevant medora +1 by 2;
    # F10 irrelevant helix -1 by none (counts as one)
    assert encode_features(x) == "1,2,-1,0;-1,0,0,0;0,0,1,1"
    assert (decode_features("1,2,-1,0;-1,0,0,0;0,0,1,1") == x).all()


def test_fact_features_count_digits_and_tone_words_in_any_case(hospital):
    from crossprofile_lib.task.roleblind import fact_features
    from crossprofile_lib.task.tokenizer import default_tokenizer
    text = "Corvane Medical PASSED 12 safety checks but was Late twice, with 3 complaints."
    t = _facts(hospital, F01={"text": text})
    x = fact_features(t)
    assert x.shape == (12, 7)
    # tokens, digits (1, 2, 3), any digit, positive words (passed), negative (late, complaints), about the first
    # option (corvane), constant
    assert x[0].tolist() == [default_tokenizer().count(text), 3.0, 1.0, 1.0, 2.0, 1.0, 1.0]
    assert x[1, 5] == 0.0 and x[1, 6] == 1.0                   # F02 is about helix, not the first option


_CHARS = SimpleNamespace(name="chars", count=len)        # one token per character ('\n' is one)


def _sized(t, private, decoy, **by_id):
    """``t`` with each fact's text ``'F01 xxxx'`` of ``private`` or ``decoy`` characters (``F03=200`` for one)."""
    def size(f):
        return by_id.get(f.id, decoy if f.role == "decoy" else private)
    return _facts(t, **{f.id: {"text": f"{f.id} {'x' * (size(f) - 4)}"} for f in t.facts})


def test_the_classic_fit_prices_private_lines_at_their_dearest_label_and_decoys_with_every_label(hospital):
    from crossprofile_lib.task.design_check import ClassicFit, Line, classic_fit
    t = _sized(hospital, 9, 9)
    # ten agents: '[A1,...,A10] ' is 33 characters, a line 9 more and a newline: 43; t_all 12 x 43 = 516,
    # budget floor(0.6 x 516) = 309; a private line '[A10] F02 xxxxx\n' 16, at '[A1]' 15
    fit = classic_fit(t, _CHARS, n_agents=10)
    assert fit == ClassicFit("dev-hospital-01", "chars", 516, 309,
                             tuple(Line(f"facts[{i}]", f.id, f.role, 16, 15) for i, f in enumerate(t.facts)
                                   if f.role != "decoy"),
                             tuple(Line(f"facts[{i}]", f.id, "decoy", 43, 43) for i in (0, 4, 7)
                                   for f in [t.facts[i]]))
    assert (fit.private_cost, fit.left) == (144, 309 - 135)


def test_the_classic_cell_names_a_decoy_that_fits_or_private_lines_over_the_budget(hospital):
    from crossprofile_lib.task.design_check import RULE, check_classic_cell, classic_fit
    # four agents: private lines 4 + 1 + n + 1, decoy lines 13 + 1 + n + 1
    held = classic_fit(_sized(hospital, 16, 9), _CHARS)   # t_all 9 x 31 + 3 x 24 = 351, budget 210, private 198
    assert (held.budget, held.private_cost, held.left, held.problem(), held.kept) == (210, 198, 12, None, (5, 0, 4))
    assert check_classic_cell(_sized(hospital, 16, 9), [_CHARS]) == [held]
    fits = classic_fit(_sized(hospital, 9, 9), _CHARS)    # t_all 288, budget 172, private 135, left 37
    assert fits.problem() == ("facts[0]", "under tokenizer chars the decoy line facts[0] (F01) costs 24 tokens and "
                              "fits in the 37 left of the budget 172 after the nine private lines: R1 would keep a "
                              "decoy; lengthen that decoy fact or the private facts")
    assert fits.kept == (5, 1, 4)
    with pytest.raises(TemplateError) as ei:
        check_classic_cell(_sized(hospital, 9, 9, F03=200), [_CHARS], "h.yaml")
    # t_all 11 x 24 + 215 = 479, budget 287; private 8 x 15 + 206 = 326, 39 over
    assert (ei.value.path, ei.value.field, ei.value.rule) == ("h.yaml", "facts[2].text", RULE)
    assert ei.value.detail == (
        "template dev-hospital-01: under tokenizer chars the nine private lines cost 326 tokens, over the budget 287 "
        "(floor(0.6 x 479)) by 39: R1 would drop a private line (the longest is facts[2] (F03, irrelevant), "
        "206 tokens); shorten private facts or lengthen decoy facts")


def test_a_server_tokenizer_asks_each_servers_root_endpoint_and_shows_it_without_credentials():
    t = ServerTokenizer(["http://h:1/v1/", "https://u:pw@h:2"], "m", "vllm", timeout=3, retries="2", retry_wait=0)
    assert t.urls == ["http://h:1/tokenize", "https://u:pw@h:2/tokenize"] and t.url == "http://h:1/tokenize"
    assert t.shown_url == "http://h:1/tokenize, https://***@h:2/tokenize" and t.name == "server:vllm:m"
    assert (t.timeout, t.retries, t.retry_wait, t.offset, t.sources) == (3.0, 2, 0.0, 0, {"store": 0, "server": 0})
    one = ServerTokenizer("http://h:1/", "m", "llama.cpp")
    assert one.urls == ["http://h:1/tokenize"] and (one.timeout, one.retries, one.retry_wait) == (30.0, 3, 1.0)
    x = ServerTokenizer("http://h:1", "m", "llama-cpp-python")
    assert x.urls == ["http://h:1/extras/tokenize"] and x.name == "server:llama-cpp-python:m"
    with pytest.raises(ValueError) as ei:
        ServerTokenizer("http://h", "m", "x")
    assert str(ei.value) == "unknown tokenize endpoint kind 'x' (known: llama-cpp-python, vllm, llama.cpp)"


def test_the_key_empty_sends_no_authorization(tokenize_server):
    srv, url = tokenize_server(_vllm(bos=0))
    assert ServerTokenizer(url, "m", "vllm", api_key="EMPTY").count("two words") == 2
    assert srv.seen[-1][2] is None
    assert ServerTokenizer(url, "m", "vllm", api_key="sk-9").count("three more words") == 3
    assert srv.seen[-1][2] == "Bearer sk-9"


@pytest.mark.parametrize("spec, message", [
    ("server", "tokenizer 'server' needs an HTTP backend (openai/..., deepseek/..., vllm/...)"),
    ("auto:x", "tokenizer 'auto:x' needs an HTTP backend (openai/..., deepseek/..., vllm/...)"),
    ("gguf:/nonexistent/x.gguf", "tokenizer 'gguf:/nonexistent/x.gguf': /nonexistent/x.gguf does not exist"),
    ("hf:/nonexistent", "tokenizer 'hf:/nonexistent': /nonexistent does not exist"),
])
def test_a_tokenizer_spec_that_cannot_be_had_here_is_refused_saying_why(spec, message):
    with pytest.raises(ValueError) as ei:
        get_tokenizer(spec)
    assert str(ei.value) == message


def test_an_unknown_tokenizer_is_refused_listing_the_choices(tmp_path):
    from crossprofile_lib.task import vocabs
    for spec in ("nonesuch-tok", str(tmp_path / "nothing-here")):      # a name, a path to nothing
        with pytest.raises(ValueError) as ei:
            get_tokenizer(spec)
        assert str(ei.value).startswith(f"unknown tokenizer '{spec}' (use qwen2.5 or llama-3.1 ")
        assert str(ei.value).endswith(f"gguf:PATH, hf:FOLDER or PATH/tokenizer.json, a name listed in "
                                      f"{vocabs.tokenizers_dir() / vocabs.USER_NAMES}, or, for HTTP backends, "
                                      f"server or auto)")
    assert get_tokenizer(None) is get_tokenizer("offline") is get_tokenizer("")


def _dead_url():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                          # nothing listens there now
    return f"http://127.0.0.1:{port}/v1"


def test_probe_servers_sums_up_the_urls_outcomes_refused_first_then_found_then_unreachable(tokenize_server):
    dead = _dead_url()
    _, none404 = tokenize_server(lambda path, body: (404, {}))
    _, found = tokenize_server(_vllm(bos=0))
    _, refused = tokenize_server(lambda path, body: (401, {}))
    no_ep = ("no tokenize endpoint answered: tried /extras/tokenize (llama-cpp-python: HTTP 404); "
             "/tokenize (vllm: HTTP 404); /tokenize (llama.cpp: HTTP 404)")
    cut = "the server cannot be reached: /extras/tokenize (ConnectionRefusedError)"
    assert probe_servers([dead, none404], "m-mix") == (None, f"{dead}: {cut}; {none404}: {no_ep}", "no-endpoint")
    assert probe_servers([dead], "m-dead") == (None, f"{dead}: {cut}", "unreachable")
    tok, why, state = probe_servers([found, refused], "m-ref", api_key="sk-r")
    assert (tok, state) == (None, "refused") and why == (
        f"{found}: vllm endpoint {found.removesuffix('/v1')}/tokenize; "
        f"{refused}: the server refused the key: /extras/tokenize (llama-cpp-python: HTTP 401)")
    tok, why, state = probe_servers([none404, found], "m-one")
    assert state == "found" and why == f"vllm endpoint {found.removesuffix('/v1')}/tokenize" and tok.count("a b c") == 3
    secret = found.replace("http://", "http://u:pw@")
    assert probe_servers([secret], "m-secret")[1] == f"vllm endpoint {found.removesuffix('/v1')}/tokenize".replace(
        "http://", "http://***@")


def test_role_blindness_holds_out_domains_by_sorted_name_and_fits_bfgs_quietly(dev_templates, monkeypatch):
    import statsmodels.api as sm

    from crossprofile_lib.task.roleblind import RoleBlindness, role_blindness
    by_id = {t.id: t for t in dev_templates}
    hosp, bus, bridge = by_id["dev-hospital-01"], by_id["dev-bus-route-01"], by_id["dev-bridge-contractor-01"]
    fits = []

    class Recorder:                                # a fit that always predicts 'decoy'
        def __init__(self, y, Z):
            fits.append([list(np.asarray(y)), np.asarray(Z).shape])

        def fit(self, **kw):
            fits[-1].append(kw)
            return SimpleNamespace(predict=lambda Z: np.tile([0.0, 1.0, 0.0], (len(Z), 1)))

    monkeypatch.setattr(sm, "MNLogit", Recorder)
    rb = role_blindness([hosp, bus, bridge], n_folds=5)

    def roles(t):
        return [("support", "decoy", "irrelevant").index(f.role) for f in t.facts]
    # domains sorted: bridge contractor (fold 0), bus route (fold 1), hospital equipment procurement (fold 2);
    # folds 3 and 4 hold no domain; training rows keep the templates' order
    kw = {"disp": 0, "maxiter": 200, "method": "bfgs"}
    assert fits == [[roles(hosp) + roles(bus), (24, 7), kw], [roles(hosp) + roles(bridge), (24, 7), kw],
                    [roles(bus) + roles(bridge), (24, 7), kw]]
    assert rb == RoleBlindness(0.25, 5 / 12, 36, 3, {"support": 0.0, "decoy": 1.0, "irrelevant": 0.0})
    rb2 = role_blindness([hosp, bus, bridge], n_folds=2)          # bridge and hospital share fold 0
    assert [f[0] for f in fits[3:]] == [roles(bus), roles(hosp) + roles(bridge)] and rb2.n_folds == 2


class _ReversingRng:
    """permutation(n) gives n-1, ..., 0."""

    def permutation(self, n):
        return np.arange(n)[::-1]


def test_private_facts_go_round_the_rotated_agents_role_by_role_and_shared_ones_to_all(hospital):
    from crossprofile_lib.task.variants import Variant, assign_holders
    all4 = ("A1", "A2", "A3", "A4")
    got = assign_holders(hospital, Variant("PSP"), 4, _ReversingRng())
    # rotation A4 A3 A2 A1; support F11 F09 F06 F04 F02 take A4 A3 A2 A1 A4; the decoys are shared; irrelevant
    # F12 F10 F07 F03 go on from the cursor: A3 A2 A1 A4
    assert list(got.items()) == [("F01", all4), ("F02", ("A4",)), ("F03", ("A4",)), ("F04", ("A1",)), ("F05", all4),
                                 ("F06", ("A2",)), ("F07", ("A1",)), ("F08", all4), ("F09", ("A3",)),
                                 ("F10", ("A2",)), ("F11", ("A4",)), ("F12", ("A3",))]
    sps = assign_holders(hospital, Variant("SPS"), 4, _ReversingRng())
    # the decoys alone are private: F08 F05 F01 take A4 A3 A2
    assert {f: h for f, h in sps.items() if h != all4} == {"F08": ("A4",), "F05": ("A3",), "F01": ("A2",)}


def test_a_kept_fact_counts_once_with_its_most_speakers_in_kept_order():
    from crossprofile_lib.task.memory import Memory
    kept = (Claim("f1 a", ("A1",), 0, "f1"), Claim("chat", ("A2",), 1), Claim("f2", ("A1",), 2, "f2"),
            Claim("f1 b", ("A3",), 3, "f1"))
    m = Memory("R1", "claims", kept, (2, 3, 2, 4), "", 0)
    assert m.kept_facts() == (("f1", 4), ("f2", 2))
    m = Memory("R1", "claims", kept, (4, 3, 1, 2), "", 0)
    assert m.kept_facts() == (("f1", 4), ("f2", 1)) and m.n_kept == 4


def test_template_tone_sums_irrelevant_polarities_for_the_correct_option_minus_the_decoy(hospital):
    from crossprofile_lib.task.evidence import template_tone
    # irrelevant: F03 medora +1 (0), F07 corvane = decoy +1 (-1), F10 helix = correct -1 (-1), F12 medora -1 (0)
    assert template_tone(hospital) == -2
    assert template_tone(_facts(hospital, F10={"polarity": 1})) == 0
    assert template_tone(_facts(hospital, F10={"polarity": 1}, F07={"polarity": -1}, F03={"about": "helix"})) == 3
    assert template_tone(_facts(hospital, F02={"polarity": -1})) == -2          # relevant facts do not count


@pytest.mark.parametrize("value, detail", [
    (True, "polarity must be the integer -1 or 1, not bool 'True'"),
    (1.0, "polarity must be the integer -1 or 1, not float '1.0'"),
    ("1", "polarity must be the integer -1 or 1, not str '1'"),
    (12345678901234567890123.5, "polarity must be the integer -1 or 1, not float '1.2345678901234568e+'"),  # 20 chars
])
def test_a_polarity_that_is_not_an_integer_is_refused_naming_its_type(tmp_path, value, detail):
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data["facts"][0]["polarity"] = value
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert (ei.value.field, ei.value.rule, ei.value.detail) == ("facts[0].polarity", "schema (strict type)", detail)


@pytest.mark.parametrize("text, folded", [
    ("\ufb01nest", "finest"),                        # a ligature: NFKC
    ("\uff22\uff45\uff53\uff54", "Best"),            # full-width letters, case kept
    ("caf\u00e9", "cafe"),                           # a precomposed accent
    ("na\u0308ive", "naive"),                        # a combining one
    ("b\u0435st", "best"),                           # a Cyrillic look-alike
    ("\u0391cme BEST", "Acme BEST"),                 # a Greek capital alpha
    ("x\u00b2 \u2460", "x2 1"),                      # super-script and circled digits
    ("Zo\u00eb\u200d", "Zoe"),                       # a zero-width joiner (Cf)
])
def test_fold_reads_text_as_a_reader_sees_it(text, folded):
    assert hints.fold(text) == folded


@pytest.mark.parametrize("text", ["This is the \ufb01nest b\u0435st offer", "A \uff22\uff45\uff53\uff54 buy"])
def test_a_hint_behind_compatibility_characters_is_found_as_disguised(fresh_hint_caches, text):
    h = hints.find_hint(text)
    assert h == hints.Hint("best", "best", True)


@pytest.mark.parametrize("rate, shown", [(-0.1, "-0.1"), (1.5, "1.5"), (float("nan"), "nan"), (1.0000001, "1.0000001")])
def test_an_opinion_rate_outside_0_to_1_is_refused_saying_what_it_is(rate, shown):
    from crossprofile_lib.task.messy import check_opinion_rate
    with pytest.raises(ValueError) as ei:
        check_opinion_rate(rate)
    assert str(ei.value) == (f"opinion rate {shown} is not in [0, 1] (the share of fact lines followed by a "
                             f"fact-less line)")


def test_an_opinion_rate_from_0_to_1_inclusive_is_taken_as_a_float():
    from crossprofile_lib.task.messy import check_opinion_rate
    assert [repr(check_opinion_rate(v)) for v in (0, 1, "0.3", 0.25)] == ["0.0", "1.0", "0.3", "0.25"]


def test_a_tokenize_request_keeps_the_query_reuses_its_connection_and_names_an_error_status(tokenize_server):
    from crossprofile_lib.task.tokenizer import HTTPStatusError
    srv, url = tokenize_server(lambda path, body: (200, {"tokens": [1, 2]}) if path.startswith("/tokenize")
                               else (404, {}))
    root = url.removesuffix("/v1")
    t = ServerTokenizer(url, "m-q", "vllm", retries=0, retry_wait=0)
    assert t._post({"prompt": "x"}, f"{root}/tokenize?lang=en") == {"tokens": [1, 2]}
    assert srv.seen[-1][0] == "/tokenize?lang=en"
    assert t.count("one") == 2
    conn = t._conns[t.url]
    assert t.count("two") == 2 and t._conns[t.url] is conn            # one keep-alive connection per URL
    with pytest.raises(HTTPStatusError) as ei:
        t._post({"prompt": "x"}, f"{root}/other")
    assert ei.value.status == 404 and str(ei.value) == "HTTP 404"


def test_a_count_is_retried_on_the_next_url_but_an_error_status_is_not_retried(tokenize_server):
    busy, u1 = tokenize_server(lambda path, body: (500, {}))
    ok, u2 = tokenize_server(lambda path, body: (200, {"tokens": [0] * 5}))
    t = ServerTokenizer([u1, u2], "m-retry", "vllm", retries=1, retry_wait=0)
    t.offset = 2
    assert t.count("x") == 3 and (len(busy.seen), len(ok.seen)) == (1, 1)       # 5 less the offset
    t.offset = 9
    assert t.count("y") == 0                                                      # never below 0
    gone, u3 = tokenize_server(lambda path, body: (404, {}))
    t = ServerTokenizer(u3, "m-404", "vllm", retries=3, retry_wait=0)
    with pytest.raises(TokenizerUnavailable) as ei:
        t.count("z")
    assert len(gone.seen) == 1
    assert str(ei.value) == (
        f"tokenizer server:vllm:m-404: the server's tokenize endpoint {u3.removesuffix('/v1')}/tokenize stopped "
        f"answering after 4 attempts (HTTPStatusError: HTTP 404) and the call cache holds no count for this text; "
        f"budgets cannot be priced with a different tokenizer mid-run: rerun when the server is back (finished calls "
        f"and counts are kept), or pass --tokenizer qwen2.5, llama-3.1, PATH/tokenizer.json or gguf:PATH")
    odd, u4 = tokenize_server(lambda path, body: (200, {"ids": []}))
    t = ServerTokenizer(u4, "m-odd2", "vllm", retries=2, retry_wait=0)
    with pytest.raises(TokenizerUnavailable, match=r"after 3 attempts \(ValueError: answer has neither"):
        t.count("w")
    assert len(odd.seen) == 3                                                     # an odd answer is retried


SUP = "superlative over the option set"


@pytest.mark.parametrize("text, expected", [
    ("Acme cut its price by 2.5 percent, the lowest of all.", hints.Comparison("lowest of all", SUP)),  # no cut at 2.5
    ("Acme is the lowest bidder, and of the three, Bell is slow.",
     hints.Comparison("lowest bidder, and of the three", SUP)),
    ("Acme is the lowest bidder. Of the three, Bell is slow.", None),      # the sentences are apart
    ("Acme is the lowest bidder; of the three, Bell is slow.", None),
    ("Acme is the lowest bidder: of the three, Bell is slow.", None),
    ("Acme is the lowest bidder! Of the three, Bell is slow.", None),
    ("Acme is the lowest bidder? Of the three, Bell is slow.", None),
    ("Acme runs the busiest junction in town.", None),
    ("Acme is lower than last year's price.", None),
    ("Acme serviced the pumps every other month.", None),
    ("Acme had the highest score in the evaluation.", hints.Comparison("highest score in the evaluation", SUP)),
    ("Acme had the highest score (by far) in the evaluation.", None),      # the clause ends at a bracket
    ("Acme had the highest score, by far, in the evaluation.", None),      # or a comma
    ("Acme was ranked first in the tender evaluation.",
     hints.Comparison("ranked first in the tender", "ranking over the option set")),
    ("Acme beat every other bidder on price.",
     hints.Comparison("beat every other bidder", "comparison with the other options")),
    ("Acme is cheaper than anyone else!", hints.Comparison("cheaper than anyone else", "comparison with the other options")),
    ("Acme is as cheap as the rest.", hints.Comparison("as cheap as the rest", "comparison with the other options")),
])
def test_a_comparison_counts_only_within_its_sentence_or_clause(text, expected):
    assert hints.find_comparison(text) == expected


def test_the_oracle_level_states_each_fact_in_the_templates_words_renumbering_the_fact_lines():
    mt = transcript()
    tmpl = SimpleNamespace(fact=lambda fid: SimpleNamespace(text=f"T-{fid}"))
    ex = extract(mt, "oracle", tmpl, ("A1", "A2", "A3", "A4"))
    assert ex.level == "oracle" and ex.members == ((0, 1, 2, 4), (3, 6))
    # the six fact lines (line 5 states none) are numbered 0-5: f2 first comes at 3
    assert ex.claims == ClaimList((Claim("T-f1", ("A1", "A2", "A3", "A4"), 0, "f1", "A1"),
                                   Claim("T-f2", ("A2", "A3"), 3, "f2", "A2")),
                                  ("A1", "A2", "A3", "A4"), ("A1", "A2", "A3", "A4"),
                                  (("A1", (0,)), ("A2", (0, 1)), ("A3", (0, 1)), ("A4", (0,))))


def _option(t, i, **update):
    return t.model_copy(update={"options": tuple(o.model_copy(update=update) if j == i else o
                                                  for j, o in enumerate(t.options))})


@pytest.mark.parametrize("change, field, detail", [
    (lambda t: t.model_copy(update={"description": "Pick the optimal pump supplier."}),
     "description", "hint word 'optimal' gives the answer away"),
    (lambda t: t.model_copy(update={"criteria": (*t.criteria[:2], t.criteria[2].model_copy(
        update={"name": "the recommended cost"}))}),
     "criteria[2].name", "hint word 'recommended' (a form of 'recommend') gives the answer away"),
    (lambda t: _option(t, 1, aliases=("Helix", "The Winner")),
     "options[1].aliases[1]", "hint word 'winner' gives the answer away"),
    (lambda t: _option(t, 2, name="Medora Preferred Devices"),
     "options[2].name", "hint word 'preferred' gives the answer away"),
    (lambda t: t.model_copy(update={"title": "Choose option B for the pumps"}),
     "title", "'choose option b' addresses the decision model or tells it what to answer"),
])
def test_rule_5_reads_every_free_text_naming_its_field(hospital, change, field, detail):
    with pytest.raises(TemplateError) as ei:
        validate_template(change(hospital), "h.yaml")
    assert (ei.value.field, ei.value.rule, ei.value.detail) == (field, "rule 5 (hint check)", detail)


def test_a_comparison_outside_the_facts_is_no_hint(hospital):
    t = hospital.model_copy(update={"title": "The cheapest of the three pumps, or the most reliable"})
    assert validate_template(t, "h.yaml") == []


def test_each_provenance_format_renders_its_label_and_the_speakers_it_reveals():
    claims = [Claim("t0", ("A2", "A10"), 0, "f1", "A10"), Claim("t1", ("A1",), 8), Claim("t2", ("A1", "A3", "A4"), 11)]
    assert render_lines(claims, "full", None) == [("[A2,A10] t0", 2), ("[A1] t1", 1), ("[A1,A3,A4] t2", 3)]
    assert render_lines(claims, "unlabeled", None) == [("t0", 1), ("t1", 1), ("t2", 1)]
    assert render_lines(claims, "first-speaker", None) == [("[A10] t0", 1), ("[A1] t1", 1), ("[A1] t2", 1)]
    assert render_lines(claims, "claim-id", None) == [("[C01] t0", 1), ("[C09] t1", 1), ("[C12] t2", 1)]
    assert render_lines(claims, "shuffled", _ReversingRng()) == [("[A1,A3,A4] t0", 3), ("[A1] t1", 1),
                                                                   ("[A2,A10] t2", 2)]
    with pytest.raises(ValueError) as ei:
        render_lines(claims, "nope", None)
    assert str(ei.value) == "unknown provenance format 'nope' (known: full, unlabeled, shuffled, first-speaker, claim-id)"


def test_design_tokenizers_fetch_no_vocabulary_unless_asked_and_say_why_one_is_missing(monkeypatch):
    from crossprofile_lib.task import vocabs
    from crossprofile_lib.task.design_check import DESIGN_PRICINGS, design_tokenizers
    assert DESIGN_PRICINGS == ("qwen2.5", "llama-3.1", "smollm2", "offline")
    monkeypatch.setattr(vocabs, "installed", lambda name: None)
    toks, missing = design_tokenizers(("offline", "qwen2.5", "nonesuch"))
    assert [t.name for t in toks] == ["offline-bpe-approx-v1"]
    assert missing["qwen2.5"] == f"not installed in {vocabs.tokenizers_dir()} (crossprofile tokenizers fetch)"
    assert missing["nonesuch"].startswith("unknown tokenizer 'nonesuch' (use ") and list(missing) == ["qwen2.5",
                                                                                                     "nonesuch"]
    loaded = []
    monkeypatch.setattr("crossprofile_lib.task.design_check.get_tokenizer",
                        lambda n: loaded.append(n) or SimpleNamespace(name=n))
    toks, missing = design_tokenizers(("qwen2.5",), fetch=True)       # asked: fetched (here: a stand-in)
    assert loaded == ["qwen2.5"] and [t.name for t in toks] == ["qwen2.5"] and missing == {}


@pytest.mark.parametrize("text, name, named", [
    ("HELIX pumps failed twice.", "Helix", True),            # any case
    ("Helixon pumps failed twice.", "Helix", False),         # part of a longer word
    ("The old-Helix line failed.", "Helix", True),           # a hyphen is no word character
    ("Corvane Medical's pumps", "Corvane Medical", True),
    ("AxB ran late.", "A.B", False),                         # the name is literal text, not a pattern
    ("A.B ran late.", "A.B", True),
    ("xHelix", "Helix", False),
])
def test_a_fact_names_an_option_as_a_whole_word_in_any_case(text, name, named):
    from crossprofile_lib.task.templates import _mentions
    assert _mentions(text, name) is named


def test_a_paraphrase_sets_design_failure_outside_a_fact_text_keeps_its_field(tmp_path, monkeypatch, hospital):
    import crossprofile_lib.task.validate as validate
    (tmp_path / "h.yaml").write_text(HOSPITAL.read_text(encoding="utf-8"), encoding="utf-8")

    def cell(t, design, path):
        if t.facts[0].text.startswith("Also, "):
            raise TemplateError(path, "facts", "design check", "over budget")

    monkeypatch.setattr(validate, "check_classic_cell", cell)
    monkeypatch.setattr(validate, "load_template", lambda p, **kw: _paraphrased(hospital))
    (v,) = validate_paths([tmp_path / "h.yaml"], design=("tok",))
    assert (str(v.error.path), v.error.field, v.error.detail) == (str(tmp_path / "h.yaml"), "facts",
                                                                  "paraphrase set 0: over budget")
    (v,) = validate_paths([tmp_path / "h.yaml"], n_options=4, design=("tok",))   # the design is for 3 options
    assert v.ok


def test_each_fact_length_warning_is_also_issued_as_a_template_warning(hospital):
    from crossprofile_lib.task.templates import TemplateWarning
    sizes = {hospital.facts[2].text: 40, hospital.facts[6].text: 11}           # F03 over 30, F07 under 12
    tok = SimpleNamespace(name="chars", count=lambda text: sizes.get(text, 20))
    with pytest.warns(TemplateWarning) as rec:
        msgs = validate_template(hospital, "x.yaml", tokenizer=tok)
    assert msgs == ["x.yaml: field 'facts[2].text': fact length 40 tokens (chars) is outside 12-30; the paper's R1 "
                    "composition in PSP at r=.6 may not hold",
                    "x.yaml: field 'facts[6].text': fact length 11 tokens (chars) is outside 12-30; the paper's R1 "
                    "composition in PSP at r=.6 may not hold"]
    assert [str(w.message) for w in rec if w.category is TemplateWarning] == msgs


@pytest.mark.parametrize("text, expected", [
    ("We should choose Acme.", hints.Hint("should choose", "should choose", False)),   # the longest phrase first
    ("Acme should be picked", hints.Hint("should", "should", False)),
    ("Acme is the clear Choice", hints.Hint("clear choice", "clear choice", False)),
    ("The board was misled by Acme.", hints.Hint("misled", "mislead", False)),          # an irregular form
    ("The decoys were cheap.", hints.Hint("decoys", "decoy", False)),                   # an inflection
    ("Acme optimised its routes.", None),                                               # innocent look-alike stems
    ("Acme offers ideals", None),
    ("Acme will bestow a grant.", None),
])
def test_a_hint_is_its_longest_phrase_any_inflection_and_never_an_innocent_word(fresh_hint_caches, text, expected):
    assert hints.find_hint(text) == expected


def test_utterances_with_one_fact_id_merge_whatever_their_words_and_two_ids_never_do():
    from crossprofile_lib.task.discussion import claim_list_from_utterances
    utt = [Utterance(0, "A1", "Corvane is slow.", "f1"), Utterance(1, "A2", "Corvane was slow to come.", "f1"),
           Utterance(2, "A3", "Corvane is slow.", "f2"), Utterance(3, "A2", "I agree.")]
    cl = claim_list_from_utterances(utt, ("A1", "A2", "A3"))
    assert cl.claims == (Claim("Corvane is slow.", ("A1", "A2"), 0, "f1", "A1"),
                         Claim("Corvane is slow.", ("A3",), 2, "f2", "A3"), Claim("I agree.", ("A2",), 3, None, "A2"))
    assert cl.by_speaker == (("A1", (0,)), ("A2", (0, 2)), ("A3", (1,))) and cl.agents == ()


def test_a_paraphrase_set_takes_each_facts_kth_wording_or_keeps_its_text_and_drops_the_paraphrases(hospital):
    from crossprofile_lib.task.templates import paraphrase_count, paraphrase_set
    f3 = hospital.facts[2].text
    t = _paraphrased(hospital, F03=("Medora one.", "Medora two.", "Medora three."))
    bare = _facts(hospital, **{f.id: {"paraphrases": ()} for f in hospital.facts})
    assert paraphrase_count(t) == 2 and paraphrase_count(bare) == 0
    two = paraphrase_set(t, 2)
    assert [f.text for f in two.facts] == [f.text if f.id != "F03" else "Medora three." for f in hospital.facts]
    assert all(f.paraphrases == () for f in two.facts)
    one = paraphrase_set(t, 1)
    assert one.facts[2].text == "Medora two." and one.facts[0].text == f"{hospital.facts[0].text} Indeed."
    assert paraphrase_set(t, 0).facts[2].text == "Medora one." and hospital.facts[2].text == f3


def test_an_unknown_domain_without_a_domains_file_lists_the_papers_twelve_and_how_to_add_one(tmp_path):
    from crossprofile_lib.task.domains import DOMAINS
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data.update(id="own-02", domain="ferry operator")
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert len(DOMAINS) == 12 and ei.value.field == "domain"
    assert ei.value.detail == (f"domain 'ferry operator' is not one of the 12 decision domains (templates/SCHEMA.md): "
                               f"{', '.join(DOMAINS)}; to add a domain of your own, list it in a file domains.yaml "
                               f"in the template's folder or a folder above it")


def test_a_name_of_ones_own_is_a_renamed_copy_and_the_tokenizer_it_names_keeps_its_name(monkeypatch):
    from crossprofile_lib.task import vocabs
    monkeypatch.setattr(vocabs, "user_names", lambda folder=None: {"mine": "offline"})
    mine = get_tokenizer("mine")
    assert mine.name == "vocab:mine (offline-bpe-approx-v1)" and get_tokenizer("vocab:mine").name == mine.name
    assert get_tokenizer("offline").name == "offline-bpe-approx-v1"          # the shared default is not renamed
    assert mine.count("three short words") == get_tokenizer("offline").count("three short words")


def test_the_classic_cell_stops_at_the_first_tokenizer_under_which_it_fails(hospital):
    from crossprofile_lib.task.design_check import check_classic_cell, classic_fit
    t = _sized(hospital, 16, 9)
    words = SimpleNamespace(name="words", count=lambda s: len(s.split()) + (1 if s == "\n" else 0))
    held = classic_fit(t, _CHARS)
    assert held.holds and not classic_fit(t, words).holds
    with pytest.raises(TemplateError) as ei:
        check_classic_cell(t, [_CHARS, words, _CHARS], "h.yaml")
    assert ei.value.detail.startswith("template dev-hospital-01: under tokenizer words the ")
    assert check_classic_cell(t, [_CHARS, _CHARS]) == [held, held]


def test_domains_files_are_read_nearest_first_from_the_templates_folder_up_and_again_when_edited(tmp_path):
    from crossprofile_lib.task.domains import DOMAINS, domain_files, domains_for
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "domains.yaml").write_text("domains: [ferry operator]\n", encoding="utf-8")
    near = tmp_path / "a" / "b" / "domains.yaml"
    near.write_text("domains: [airport catering]\n", encoding="utf-8")
    t = tmp_path / "a" / "b" / "t.yaml"
    assert domain_files(t)[:2] == (near, tmp_path / "a" / "domains.yaml")
    assert domain_files(tmp_path / "a" / "t.yaml")[:1] == (tmp_path / "a" / "domains.yaml",)    # not the one below
    assert domains_for(t) >= {"ferry operator", "airport catering", *DOMAINS}
    near.write_text("domains: [airport catering, river barge line]\n", encoding="utf-8")     # a new stamp
    assert "river barge line" in domains_for(t) and "river barge line" not in domains_for(tmp_path / "a" / "t.yaml")


def test_the_tone_sums_every_kept_irrelevant_fact_not_only_the_last():
    from crossprofile_lib.task.evidence import Composition, composition
    facts = {"i1": SimpleNamespace(role="irrelevant", about="A", relevant=False, polarity=1),    # +1: praises correct
             "i2": SimpleNamespace(role="irrelevant", about="A", relevant=False, polarity=1),    # +1
             "i3": SimpleNamespace(role="irrelevant", about="B", relevant=False, polarity=1),    # -1: praises the decoy
             "s1": SimpleNamespace(role="support", about="A", relevant=True, polarity=1),
             "s2": SimpleNamespace(role="support", about="A", relevant=True, polarity=1)}
    task = SimpleNamespace(template=SimpleNamespace(fact=facts.__getitem__, correct_option="A", decoy_option="B"))
    memory = SimpleNamespace(kept_facts=lambda: tuple((f, 1) for f in facts))
    assert composition(task, memory) == Composition(2, 0, 3, 2, 1)      # tone +1 +1 -1; the last alone is -1


def test_the_template_tone_is_an_integer_count(hospital):
    from crossprofile_lib.task.evidence import template_tone
    assert repr(template_tone(hospital)) == "-2"                          # not -2.0: it is printed as a count
    assert repr(template_tone(_facts(hospital, F10={"polarity": 1}, F07={"polarity": -1}, F03={"about": "helix"}))) == "3"


def test_a_bare_path_to_a_gguf_file_is_read_as_a_gguf_tokenizer(tmp_path, monkeypatch):
    from crossprofile_lib.task import llama_engine
    from crossprofile_lib.task.tokenizer import GGUFTokenizer
    engine = SimpleNamespace(tokenize=lambda text, special, add_special: text.split())
    opened = []
    monkeypatch.setattr(llama_engine, "open_vocab", lambda path: opened.append(path) or engine)
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    tok = get_tokenizer(str(f))
    assert isinstance(tok, GGUFTokenizer) and tok.name == "gguf:m.gguf" and opened == [f]
    assert tok.count("two words") == 2


def test_without_a_llama_cpp_engine_a_gguf_vocabulary_is_rebuilt_from_that_file(tmp_path, monkeypatch):
    from crossprofile_lib.task import gguf_bpe, llama_engine
    from crossprofile_lib.task.tokenizer import GGUFTokenizer

    def no_engine(path):
        raise ImportError("no llama.cpp engine")

    read = []
    monkeypatch.setattr(llama_engine, "open_vocab", no_engine)
    monkeypatch.setattr(gguf_bpe, "read_vocab", lambda path: read.append(path) or "VOCAB")
    monkeypatch.setattr(gguf_bpe, "build_tokenizer", lambda vocab: SimpleNamespace(
        encode=lambda text, add_special_tokens: SimpleNamespace(ids=list(text) if vocab == "VOCAB" else [])))
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    tok = GGUFTokenizer(f)
    assert read == [f] and tok.count("abc") == 3
