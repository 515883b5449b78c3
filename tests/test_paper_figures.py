"""data/paper_figures.yaml is the one source of the paper's numbers (issue 13.2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from crossprofile_lib.hiddenbench.measures import PAPER_MODELS, PAPER_REFS, paper_table
from crossprofile_lib.paper_figures import PaperFiguresError, load_paper_figures, paper_item, paper_values
from crossprofile_lib.stats.contrasts import PreregError, load_prereg, parse_prereg

ROOT = Path(__file__).resolve().parents[1]
ITEMS = load_paper_figures()
VALUES = {float(v) for it in ITEMS for v in it.paper.values() if isinstance(v, (int, float))}


def test_stated_values_the_issue_names():
    assert paper_values("h3/H3: R1-rel - R1") == {"Qwen2.5-7B-Instruct": 8.5, "Llama-3.1-8B-Instruct": 15.6}
    # the 71.1% decoy figure names no model in the paper: it is not credited to one
    assert paper_values("classic-b4-decoy/B4 chose the decoy") == {"models not separated": 71.1}
    assert paper_values("classic-r1-b4/R1 - B4") == {"Qwen2.5-7B-Instruct": 70.6, "Llama-3.1-8B-Instruct": 66.1}


def test_prereg_refers_to_the_file_instead_of_repeating_numbers():
    doc = yaml.safe_load((ROOT / "prereg.yaml").read_text())
    for c in doc["contrasts"]:
        if "paper" in c:
            assert isinstance(c["paper"], str), f"prereg.yaml contrast {c['id']}: paper must be a reference"
    for c in load_prereg().contrasts:
        if c.paper is not None:
            ref = next(x["paper"] for x in doc["contrasts"] if x["id"] == c.id)
            assert c.paper == paper_item(ref).paper


def test_a_bad_reference_names_the_field():
    doc = {"contrasts": [{"id": "x", "terms": [{"weight": 1, "where": {"policy": "R1"}}], "paper": "h3/nope"}]}
    with pytest.raises(PreregError, match=r"contrasts\[0\]\.paper.*no paper figure 'h3/nope'"):
        parse_prereg(doc, "mine.yaml")


def test_hiddenbench_paper_table_is_read_from_the_file():
    t = paper_table("controlled")
    for ref in PAPER_REFS["controlled"]:
        it = paper_item(ref)
        for m in PAPER_MODELS:
            assert t.loc[it.label, f"paper {m}"] == it.paper[m]
    n = paper_table("natural")
    assert (n.loc["group vote"].tolist()) == [23.6, 31.8]


def test_duplicate_reference_is_refused(tmp_path):
    f = tmp_path / "p.yaml"
    item = {"label": "R1", "unit": "%", "paper": {"m": 1.0}}
    f.write_text(yaml.safe_dump({"figures": [{"id": "a", "result": "r", "data": "crossprofile",
                                              "items": [item, item]}]}))
    with pytest.raises(PaperFiguresError, match="duplicate reference 'a/R1'"):
        load_paper_figures(f)


_NUM = re.compile(r"(?:(?<=^)|(?<=[\s(\[{:=,/]))[-+]?\d+\.\d+(?![\w.])")


def _sources():
    """Library, prereg and every page's text (values below 1 are checked in code only: they
    collide with budget ratios such as r = 0.4 in prose)."""
    for p in sorted((ROOT / "crossprofile_lib").rglob("*.py")):
        yield p
    yield ROOT / "prereg.yaml"
    yield from sorted((ROOT / "notebooks").glob("*.md"))
    yield from sorted((ROOT / "book").glob("*.md"))
    yield ROOT / "README.md"


def test_no_paper_number_is_retyped_next_to_the_word_paper():
    """Any line that mentions 'paper' and carries one of the paper's decimal numbers retypes a
    paper value that should be read from data/paper_figures.yaml."""
    bad = []
    for p in _sources():
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if "paper" not in line.lower():
                continue
            prose = p.suffix == ".md"
            for m in _NUM.finditer(line):
                v = abs(float(m.group()))
                if v in {abs(x) for x in VALUES} and not (prose and v < 1):
                    bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not bad, "paper values retyped outside data/paper_figures.yaml:\n" + "\n".join(bad)
