"""The messy protocol, claim extraction levels and paraphrases (issue 27): hand-checked cases."""

import dataclasses
import math

import pytest

from crossprofile_lib.policies import select_memory
from crossprofile_lib.run.pipeline import SCRIPTED, Protocol, build_task
from crossprofile_lib.safety.inputs import TemplateError
from crossprofile_lib.task.discussion import Transcript, Utterance, claim_list, make_task, scripted_discussion
from crossprofile_lib.task.extraction import FUZZY_THRESHOLD, MODEL_UNAVAILABLE, extract, merge_quality
from crossprofile_lib.task.messy import FILLERS, MessyTranscript, messy_discussion
from crossprofile_lib.task.templates import check_paraphrases, paraphrase_count, validate_template
from crossprofile_lib.task.tokenizer import default_tokenizer
from crossprofile_lib.task.variants import agent_names

AGENTS = agent_names(4)


def _mt(rows, order=("A1", "A2", "A3", "A4")):
    """A messy transcript from ``(speaker, text, fact id or None)`` rows."""
    utt = tuple(Utterance(i, s, text, None) for i, (s, text, _) in enumerate(rows))
    return MessyTranscript(Transcript(tuple(order), utt), tuple(f for _, _, f in rows),
                           tuple(0 if f else -1 for _, _, f in rows), 0.0)


def _with_paraphrase(t, fid, extra):
    facts = tuple(f.model_copy(update=dict(paraphrases=f.paraphrases + (extra,))) if f.id == fid else f
                  for f in t.facts)
    return t.model_copy(update=dict(facts=facts))


def test_a_shared_fact_in_four_wordings_splits_under_exact_and_merges_under_oracle(hospital):
    """Hand-checked: the decoy F01 said by four agents in four wordings (text + 3 paraphrases)."""
    f = hospital.fact("F01")
    words = (f.text, *f.paraphrases[:2], "Corvane Medical pumps cleared all electrical safety checks at 3 "
                                         "regional hospitals in 2024.")
    assert len(set(words)) == 4
    mt = _mt([(a, w, "F01") for a, w in zip(AGENTS, words)])
    ex = extract(mt, "exact", hospital, AGENTS)
    assert [c.speakers for c in ex.claims] == [("A1",), ("A2",), ("A3",), ("A4",)]
    assert all(c.count == 1 for c in ex.claims)  # four claims that each look private
    q = merge_quality(mt, ex)
    assert math.isnan(q.precision)  # nothing merged: no merged pair to be right or wrong
    assert (q.recall, q.split_rate, q.rare_rate) == (0.0, 1.0, 1.0)
    orc = extract(mt, "oracle", hospital, AGENTS)
    assert len(orc.claims) == 1 and orc.claims.claims[0].speakers == tuple(AGENTS)
    assert orc.claims.claims[0].text == f.text
    q = merge_quality(mt, orc)
    assert (q.precision, q.recall, q.split_rate, q.rare_rate) == (1.0, 1.0, 0.0, 0.0)


def test_exact_merges_only_identical_text_case_and_spacing_aside(hospital):
    f = hospital.fact("F01")
    mt = _mt([("A1", f.text, "F01"), ("A2", "  " + f.text.upper() + " ", "F01"), ("A3", f.text[:-1], "F01")])
    ex = extract(mt, "exact", hospital, AGENTS)
    assert [c.speakers for c in ex.claims] == [("A1", "A2"), ("A3",)]  # a dropped full stop is another string


def test_fuzzy_threshold_near_misses(hospital):
    """token_sort_ratio >= 80 merges; just under does not (scores hand-checked with rapidfuzz)."""
    from rapidfuzz import fuzz
    from rapidfuzz.utils import default_process
    a = "Corvane Medical pumps passed every electrical safety inspection."
    near = "Corvane Medical pumps passed each electrical safety inspection."      # one word changed
    far = "Corvane Medical units cleared all of its safety checks last spring."  # reworded
    s_near = fuzz.token_sort_ratio(default_process(a), default_process(near))
    s_far = fuzz.token_sort_ratio(default_process(a), default_process(far))
    assert s_near >= FUZZY_THRESHOLD > s_far
    mt = _mt([("A1", a, "F01"), ("A2", near, "F01"), ("A3", far, "F01")])
    ex = extract(mt, "fuzzy", hospital, AGENTS)
    assert [c.speakers for c in ex.claims] == [("A1", "A2"), ("A3",)]
    # the threshold is the rule: a threshold just above the near miss's score splits it too
    ex2 = extract(mt, "fuzzy", hospital, AGENTS, threshold=s_near + 0.01)
    assert len(ex2.claims) == 3
    ex3 = extract(mt, "fuzzy", hospital, AGENTS, threshold=s_far)
    assert len(ex3.claims) == 1


def test_fuzzy_false_merge_counts_against_precision(hospital):
    a, b = hospital.fact("F04").text, hospital.fact("F11").text
    mt = _mt([("A1", a, "F04"), ("A2", b, "F11"), ("A3", "I agree with that.", None)])
    ex = extract(mt, "fuzzy", hospital, AGENTS, threshold=0.0)  # everything merges into one claim
    q = merge_quality(mt, ex)
    assert len(ex.claims) == 1 and q.precision == 0.0  # F04+F11, F04+filler, F11+filler: none the same fact
    assert math.isnan(q.recall)                          # no fact was said twice


def test_oracle_level_is_the_scripted_claim_list_line_for_line(dev_templates):
    for t in dev_templates[:4]:
        for v in ("PSP", "SPS", "SSS"):
            task = make_task(t, v, 1)
            scripted = claim_list(scripted_discussion(task), AGENTS)
            for rate in (0.0, 0.5, 1.0):
                mt = messy_discussion(task, rate)
                orc = extract(mt, "oracle", t, AGENTS).claims
                assert orc == scripted


def test_scripted_unit_unchanged_and_messy_oracle_keeps_the_same_memories(dev_templates):
    """The scripted protocol is the default and unchanged; R1/B4/Random memories under the messy oracle are
    byte-identical to the scripted ones (the claim lists are equal)."""
    tok = default_tokenizer()
    t = dev_templates[0]
    u0 = build_task(t, "PSP", 0, tokenizer=tok)
    assert u0.protocol is SCRIPTED and u0.merge is None
    assert u0.claims == claim_list(scripted_discussion(make_task(t, "PSP", 0)), AGENTS)
    u1 = build_task(t, "PSP", 0, tokenizer=tok, protocol=Protocol("messy", "oracle", 0.5))
    for p in ("R1", "B4", "M1"):
        assert select_memory(p, u0.claims, 200, tok, None).text == select_memory(p, u1.claims, 200, tok, None).text


def test_messy_discussion_deterministic_by_seed_and_rate_only_adds_lines(dev_templates):
    t = dev_templates[2]
    task = make_task(t, "PSP", 7)
    a, b = messy_discussion(task, 0.3), messy_discussion(task, 0.3)
    assert a == b
    other = messy_discussion(make_task(t, "PSP", 8), 0.3)
    assert other.transcript.render() != a.transcript.render()
    lo, hi = messy_discussion(task, 0.0), messy_discussion(task, 1.0)
    facts_lo = [u.text for u, f in zip(lo.utterances, lo.truth) if f]
    facts_hi = [u.text for u, f in zip(hi.utterances, hi.truth) if f]
    assert facts_lo == facts_hi                      # common random numbers: same wordings
    assert len(lo.utterances) == len(facts_lo)       # rate 0: no fact-less line
    assert len(hi.utterances) == 2 * len(facts_hi)   # rate 1: one after every fact line
    fillers = {line for _, line in FILLERS}
    assert all(u.text in fillers for u, f in zip(hi.utterances, hi.truth) if f is None)


def test_later_speakers_restate_shared_facts_in_other_wordings(dev_templates):
    t = dev_templates[0]
    mt = messy_discussion(make_task(t, "SSS", 3), 0.0)
    by_fact = {}
    for w, f in zip(mt.wording, mt.truth):
        by_fact.setdefault(f, []).append(w)
    for f, ws in by_fact.items():
        n = 1 + len(t.fact(f).paraphrases)
        assert len(ws) == 4
        assert len(set(ws)) == min(4, n)            # every wording is used before one repeats
        assert all(x != y for x, y in zip(ws, ws[1:]))


def test_ground_truth_never_in_a_policys_input(dev_templates):
    """What a policy or model can see carries no fact id: the transcript's utterances have none, and the
    memories R1, B4, Random and M1 build do not change when the claims' fact ids are removed."""
    tok = default_tokenizer()
    t = dev_templates[1]
    u = build_task(t, "PSP", 2, tokenizer=tok, protocol=Protocol("messy", "exact", 0.4))
    assert all(x.fact_id is None for x in u.transcript.utterances)
    assert not any(f.id in u.transcript.render() for f in t.facts)
    blind = dataclasses.replace(u.claims, claims=tuple(dataclasses.replace(c, fact_id=None) for c in u.claims))
    from crossprofile_lib.rng import stream
    for p in ("R1", "B4", "Random", "M1"):
        m1 = select_memory(p, u.claims, 180, tok, stream(0, "x"))
        m2 = select_memory(p, blind, 180, tok, stream(0, "x"))
        assert m1.text == m2.text and "F0" not in m1.text


def test_a_restated_fact_kept_twice_counts_once(hospital):
    """Composition and the reference decider count a fact once however many kept lines state it."""
    from crossprofile_lib.backends.ledger import ReferenceDecider
    from crossprofile_lib.task.evidence import composition
    f = hospital.fact("F01")
    mt = _mt([("A1", f.text, "F01"), ("A2", f.paraphrases[0], "F01")])
    ex = extract(mt, "exact", hospital, AGENTS)
    task = make_task(hospital, "SSS", 0)
    mem = select_memory("ALL", ex.claims, None, default_tokenizer(), None)
    assert mem.n_kept == 2 and composition(task, mem).kept_decoy == 1
    s = ReferenceDecider().option_scores(task, mem, hospital.option_ids)
    assert s[hospital.option_ids.index("corvane")] == 1.0


def test_model_level_unavailable_on_the_reference_decider(hospital):
    mt = _mt([("A1", hospital.fact("F01").text, "F01")])
    with pytest.raises(ValueError, match="needs a model backend"):
        extract(mt, "model", hospital, AGENTS)
    assert "reference decider" in MODEL_UNAVAILABLE
    ex = extract(mt, "model", hospital, AGENTS, extractor=lambda utt: [[u.position for u in utt]])
    assert len(ex.claims) == 1
    with pytest.raises(ValueError, match="needs the messy protocol"):
        Protocol("scripted", "exact")


# --- paraphrases in templates ------------------------------------------------------------------------
def test_every_bundled_template_has_two_paraphrases_per_fact(dev_templates):
    from crossprofile_lib.task.templates import load_templates
    ts = load_templates(["templates"])
    assert len(ts) == 70
    assert all(paraphrase_count(t) >= 2 for t in ts), [t.id for t in ts if paraphrase_count(t) < 2]


def test_paraphrase_with_a_hint_word_fails_naming_fact_and_index(hospital):
    bad = _with_paraphrase(hospital, "F05", "Helix Infusion Systems is the best choice for maintenance costs.")
    with pytest.raises(TemplateError) as e:
        validate_template(bad, "h.yaml")
    assert e.value.field == "facts[4].paraphrases[2]" and "F05" in str(e.value) and "rule 5" in e.value.rule


def test_paraphrase_superlative_over_the_option_set_fails(hospital):
    bad = _with_paraphrase(hospital, "F09", "Helix Infusion Systems offered the lowest five-year cost of the three.")
    with pytest.raises(TemplateError) as e:
        validate_template(bad, "h.yaml")
    assert e.value.field == "facts[8].paraphrases[2]" and "rule 5" in e.value.rule


def test_paraphrase_naming_another_option_or_repeating_fails(hospital):
    bad = _with_paraphrase(hospital, "F02", "Helix pumps logged fewer alarm faults than Medora Devices pumps.")
    with pytest.raises(TemplateError, match=r"facts\[1\]\.paraphrases\[2\]"):
        validate_template(bad, "h.yaml")
    f = hospital.fact("F02")
    rep = _with_paraphrase(hospital, "F02", f.text.upper())
    with pytest.raises(TemplateError, match="repeats its text"):
        check_paraphrases(rep, "h.yaml")
    one = hospital.model_copy(update=dict(facts=tuple(
        x.model_copy(update=dict(paraphrases=x.paraphrases[:1])) if x.id == "F03" else x for x in hospital.facts)))
    with pytest.raises(TemplateError, match="rule 6"):
        check_paraphrases(one, "h.yaml")
    none = hospital.model_copy(update=dict(facts=tuple(x.model_copy(update=dict(paraphrases=()))
                                                       for x in hospital.facts)))
    check_paraphrases(none, "h.yaml")  # paraphrases are optional


def test_paraphrase_design_check_names_the_paraphrase(hospital, paper_tokenizers):
    """A paraphrase long enough to push the nine private lines over the budget fails the design check on
    its set, naming facts[i].paraphrases[k]."""
    from crossprofile_lib.task.validate import _check_paraphrase_design
    tok = next(t for t in paper_tokenizers if "qwen" in t.name)
    i, f = next((i, f) for i, f in enumerate(hospital.facts) if f.role == "support")
    long = f.paraphrases[0].rstrip(".") + ", as the committee's visiting team saw for itself during two long visits."
    facts = tuple(x.model_copy(update=dict(paraphrases=(long,) + x.paraphrases[1:])) if x.id == f.id else x
                  for x in hospital.facts)
    t = hospital.model_copy(update=dict(facts=facts))
    with pytest.raises(TemplateError) as e:
        _check_paraphrase_design(t, 0, [tok], "h.yaml")
    assert e.value.field == f"facts[{i}].paraphrases[0]" and "design check" in e.value.rule
    _check_paraphrase_design(hospital, 0, [tok], "h.yaml")


def test_paraphrases_keep_the_qwen_token_window(paper_tokenizers):
    """Every bundled paraphrase is priced within scripts/write_paraphrases.py's TOLERANCE of its fact text
    under Qwen2.5's tokenizer."""
    from crossprofile_lib.task.templates import load_templates
    tok = next(t for t in paper_tokenizers if "qwen" in t.name)
    tol = 3  # scripts/write_paraphrases.py TOLERANCE
    worst = max(abs(tok.count(p) - tok.count(f.text)) for t in load_templates(["templates"]) for f in t.facts
                for p in f.paraphrases)
    assert worst <= tol


def test_role_blindness_holds_on_each_paraphrase_set():
    from crossprofile_lib.task.roleblind import role_blindness
    from crossprofile_lib.task.templates import load_templates, paraphrase_set
    formal = [t for t in load_templates(["templates/formal"])]
    for k in (0, 1):
        rb = role_blindness([paraphrase_set(t, k) for t in formal])
        assert rb.accuracy <= rb.base_rate + 0.10, (k, rb)


def test_write_paraphrases_check_reports_no_change(tmp_path):
    """The generator is deterministic: on the bundled templates ``--check`` finds nothing to change."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "scripts/write_paraphrases.py", "--check",
                        "templates/dev/dev-hospital-01.yaml"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


#: sha256 of every scripted claim line (70 templates x 8 variants x seeds 0-2), computed on main before the
#: messy protocol existed (commit fd06d18, 7a7235ae...); the scripted protocol must stay byte-identical. Recomputed
#: once for new template text, not new code: issue 52 item 8 swapped the option names of two irrelevant facts in 11
#: formal templates (the same code gave 7a7235ae... on the old templates).
SCRIPTED_GOLDEN = "f91a29c1c3d808d36ef6c6820b0f40b7d2a0149aba9fde597c579300c7bbfe01"


def test_scripted_claim_lists_byte_identical_to_before_the_messy_protocol():
    import hashlib

    from crossprofile_lib.task.templates import load_templates
    from crossprofile_lib.task.variants import VARIANT_NAMES
    h = hashlib.sha256()
    for t in load_templates(["templates"]):
        for v in VARIANT_NAMES:
            for s in (0, 1, 2):
                cl = claim_list(scripted_discussion(make_task(t, v, s)), AGENTS)
                for c in cl:
                    h.update(f"{t.id}/{v}/{s}|{c.line()}|{c.first_mention}|{c.fact_id}|{c.first_speaker}\n".encode())
                h.update(repr(cl.by_speaker).encode())
    assert h.hexdigest() == SCRIPTED_GOLDEN


def test_cli_run_messy_on_the_reference_decider(tmp_path):
    """`crossprofile run --protocol messy --extraction exact` writes the protocol columns; model extraction on
    the ledger and a messy option without --protocol messy are usage errors naming the option."""
    import subprocess
    import sys

    import pandas as pd
    base = [sys.executable, "-m", "crossprofile_lib.cli", "run", "--templates", "templates/dev/dev-hospital-01.yaml",
            "--seeds", "0", "--budgets", "0.6", "--policies", "R1,B4", "--variants", "PSP,SPS"]
    r = subprocess.run(base + ["--protocol", "messy", "--extraction", "exact", "--opinion-rate", "0.5",
                               "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    df = pd.read_parquet(tmp_path / "x" / "results.parquet")
    assert set(df["protocol"]) == {"messy"} and set(df["extraction"]) == {"exact"} and set(df["opinion_rate"]) == {0.5}
    assert df["n_claims"].min() > 12 and df["split_rate"].notna().all()
    r = subprocess.run(base + ["--out", str(tmp_path / "s")], capture_output=True, text=True, timeout=300)
    df = pd.read_parquet(tmp_path / "s" / "results.parquet")
    assert set(df["protocol"]) == {"scripted"} and set(df["extraction"]) == {"oracle"} and (df["n_claims"] == 12).all()
    import json
    assert "protocol" not in json.loads((tmp_path / "s" / "run.json").read_text())["config"]  # as before issue 27
    r = subprocess.run(base + ["--protocol", "messy", "--extraction", "model", "--out", str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--extraction" in r.stderr and "reference decider" in r.stderr
    r = subprocess.run(base + ["--extraction", "fuzzy", "--out", str(tmp_path / "f")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and "--protocol messy" in r.stderr
    r = subprocess.run(base + ["--protocol", "messy", "--opinion-rate", "1.5", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--opinion-rate" in r.stderr


def test_model_level_with_a_chat_backend_uses_the_natural_extractor(hospital):
    """The model level on a (fake) chat backend: one extraction call per utterance, answers parsed and merged
    by the natural protocol's rules; restatements the extractor words alike merge, the prompt has no fact id."""
    from crossprofile_lib.backends.base import ChatResult
    from crossprofile_lib.hiddenbench.claims import model_extractor

    class Echo:
        def __init__(self):
            self.requests = []

        def chat(self, reqs):
            self.requests += list(reqs)
            # a model that reduces every utterance to its first six words
            return [ChatResult("- " + " ".join(r.messages[-1]["content"].split("Message:")[-1].split()[:6]))
                    for r in reqs]

    f = hospital.fact("F01")
    other = "Corvane Medical pumps passed every electrical check the council ran last year."  # same first 6 words
    assert other.split()[:6] == f.text.split()[:6]
    mt = _mt([("A1", f.text, "F01"), ("A2", other, "F01"), ("A3", hospital.fact("F04").text, "F04"),
              ("A4", "I agree with that.", None)])
    be = Echo()
    ex = extract(mt, "model", hospital, AGENTS, extractor=model_extractor(be))
    assert len(be.requests) == 4 and all("F01" not in r.messages[-1]["content"] for r in be.requests)
    assert [c.speakers for c in ex.claims] == [("A1", "A2"), ("A3",), ("A4",)]
    assert [c.text for c in ex.claims][:2] == [f.text, hospital.fact("F04").text]
    q = merge_quality(mt, ex)
    assert (q.precision, q.recall, q.split_rate) == (1.0, 1.0, 0.0)
    assert len(extract(mt, "exact", hospital, AGENTS).claims) == 4  # exact keeps the two wordings apart
