"""Hostile template text never reaches the book as markup (issue 23, item 6): the validator refuses
markup in every text field, and every table the book renders (``Captions.table``, the chapters' one
table helper) escapes its cells, index and column labels -- here checked on the Styler's HTML."""

import re
import shutil
from pathlib import Path

import pandas as pd
import yaml

from crossprofile_lib.book.display import Captions
from crossprofile_lib.task.templates import load_template
from crossprofile_lib.task.validate import validate_paths

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ["<script>alert(1)</script>", '<img src=x onerror="alert(2)">', "</table><b>", "<!-- x -->"]


def test_every_table_of_the_book_escapes_cells_and_labels():
    df = pd.DataFrame({HOSTILE[0]: [HOSTILE[1], 1.25], "plain": [HOSTILE[2], 2.5]},
                      index=pd.Index([HOSTILE[3], "R1"], name="policy"))
    html = Captions(2).table(df, "Templates by domain.", []).to_html()
    assert "<script" not in html and "<img" not in html and "<b>" not in html and "<!--" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in html.replace("&quot;", "&#34;")
    assert re.search(r">\s*1\.2\s*<", html) or ">1.2<" in html  # numbers are still formatted (precision 1)
    two = pd.DataFrame({"x": [1.0]}, index=pd.MultiIndex.from_tuples([("R1", HOSTILE[0])], names=["a", "b"]))
    assert "<script" not in Captions(2).table(two, "t", []).to_html()


def test_the_validator_refuses_markup_in_every_text_field(tmp_path):
    good = yaml.safe_load((ROOT / "templates/dev/dev-hospital-01.yaml").read_text())
    fields = {"title": lambda d, v: d.update(title=v), "description": lambda d, v: d.update(description=v),
              "options[0].name": lambda d, v: d["options"][0].update(name=v),
              "criteria[1].name": lambda d, v: d["criteria"][1].update(name=v),
              "facts[2].text": lambda d, v: d["facts"][2].update(text=d["facts"][2]["text"] + " " + v)}
    for i, (field, put) in enumerate(fields.items()):
        for j, v in enumerate(HOSTILE + ["&lt;b&gt;", "javascript:alert(1)"]):
            d = yaml.safe_load(yaml.safe_dump(good))
            put(d, v)
            (tmp_path / f"t{i}-{j}.yaml").write_text(yaml.safe_dump(d, allow_unicode=True))
    verdicts = validate_paths(tmp_path)
    assert verdicts and all(not v.ok and v.error.rule == "schema (markup)" for v in verdicts), \
        [v.line() for v in verdicts if v.ok or v.error.rule != "schema (markup)"]
    # near misses are plain text: a comparison sign, an ampersand in a name
    d = yaml.safe_load(yaml.safe_dump(good))
    d["description"] += " Repairs must take < 5 days; Smith & Sons audited the bids."
    (tmp_path / "ok" ).mkdir()
    (tmp_path / "ok" / "t.yaml").write_text(yaml.safe_dump(d, allow_unicode=True))
    assert load_template(tmp_path / "ok" / "t.yaml").id == "dev-hospital-01"
    shutil.rmtree(tmp_path / "ok")
