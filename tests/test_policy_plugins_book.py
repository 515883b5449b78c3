"""A policy of your own in the book (issue 22, item 3): `make book POLICY_FILES=...`, page 16, the explorer.

* POLICY_FILES is checked before anything runs (a bad file: exit 2 naming the variable, the file, the rule);
* the user's policies join the reference grid, whose run.json names the file and its SHA-256; an edited
  file never reuses the run the old file made;
* page 16's failure table puts each wrong decision where its net lead says (hand-made rows);
* the explorer shows a policy of your own (and lists it in its dropdown).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from policy_registry import policy_registry_kept

from crossprofile_lib.policies import plugins

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "policies" / "keep_longest.py"


@pytest.fixture(autouse=True)
def fresh_registry():
    with policy_registry_kept():
        yield


def test_bad_policy_files_variable_stops_the_build_before_anything_runs(tmp_path, capsys):
    from crossprofile_lib.book.build import BookConfigError
    from crossprofile_lib.cli.book import book_params
    bad = tmp_path / "bad.py"
    bad.write_text("POLICY = 3\n")
    with pytest.raises(BookConfigError, match=r"POLICY_FILES=.*bad.py: .*bad.py: type: POLICY is a int"):
        book_params(quick=True, env={"POLICY_FILES": str(bad)})
    with pytest.raises(BookConfigError, match=r"POLICY_FILES=.*nope.py: exists: no such file"):
        book_params(quick=True, env={"POLICY_FILES": str(tmp_path / "nope.py")})
    p = book_params(quick=True, env={"POLICY_FILES": str(EXAMPLE)})
    assert p.policy_files == [str(EXAMPLE)] and p.user_policies == ["Longest"]


def test_user_policy_joins_the_reference_grid_and_an_edit_makes_a_new_run(tmp_path):
    from crossprofile_lib.book.experiments import BookRuns
    from crossprofile_lib.book.params import BookParams
    mine = tmp_path / "mine.py"
    mine.write_text(EXAMPLE.read_text())
    p = BookParams.quick(runs_root=str(tmp_path / "runs"), policy_files=[str(mine)])
    run = BookRuns(p).reference()
    assert {"Longest", "Longest-k7", "Longest:unlabeled", "R1"} <= set(run.df.policy)  # with its controls
    rec = json.loads((run.path / "run.json").read_text())["policy_files"]
    assert [(r["path"], r["policies"]) for r in rec] == [(str(mine.resolve()), ["Longest"])]
    again = BookRuns(p).reference()
    assert again.path == run.path  # the same file: found, not rerun

    # an edited file (same policy name) must not be served the old file's results
    for d in (plugins.REGISTRY, plugins.PLUGINS):
        d.pop("Longest")
    plugins._LOADED.clear()
    mine.write_text(EXAMPLE.read_text().replace("-len(claims.claims[i].text)", "len(claims.claims[i].text)"))
    edited = BookRuns(BookParams.quick(runs_root=str(tmp_path / "runs"), policy_files=[str(mine)])).reference()
    assert edited.path != run.path
    assert json.loads((edited.path / "run.json").read_text())["policy_files"][0]["sha256"] != rec[0]["sha256"]
    assert (run.path / "results.parquet").exists()  # the old run is kept


def _run(rows):
    from crossprofile_lib.book.runs import Run
    return Run(Path("x"), pd.DataFrame(rows), {})


def test_failures_by_net_lead_blames_the_memory_at_a_lead_of_zero_or_less():
    from crossprofile_lib import book
    rows = [dict(policy="Mine", budget_label="0.6", net_lead=lead, correct=ok, chose_decoy=dec)
            for lead, ok, dec in [(-2, False, True), (-2, False, False), (0, False, True), (0, True, False),
                                  (1, False, False), (3, True, False), (3, True, False)]]
    rows.append(dict(policy="R1", budget_label="0.6", net_lead=-5, correct=False, chose_decoy=True))  # another policy
    rows.append(dict(policy="Mine", budget_label="0.8", net_lead=-5, correct=False, chose_decoy=True))  # another budget
    r = _run(rows)
    t = book.failures_by_net_lead(r, "Mine", "0.6").set_index("net lead")
    assert list(t.index) == [-2, 0, 1, 3]
    assert t["decisions"].tolist() == [2, 2, 1, 2] and t["wrong"].tolist() == [2, 1, 1, 0]
    assert t.loc[-2, "wrong: chose the decoy (%)"] == 50 and t.loc[0, "accuracy (%)"] == 50
    assert t.loc[0, "a wrong decision here is"] == "the memory's failure"     # 0 is the memory's, not the decider's
    assert t.loc[1, "a wrong decision here is"] == "the decider's failure"
    assert book.failure_summary(r, "Mine", "0.6").startswith("Mine: 4 of 7 decisions wrong at r = 0.6; 3 of them (75%)")


def test_policies_in_finds_the_controls_of_a_user_policy():
    from crossprofile_lib import book
    r = _run([dict(policy=p) for p in ["R1", "Mine", "Mine-k7", "Mine:unlabeled", "Mine-kx", "R1-k7", "Miner"]])
    assert book.policies_in(r, ["Mine"]) == ["Mine", "Mine-k7", "Mine:unlabeled"]
    assert book.policies_in(None, ["Mine"]) == []


def test_the_explorer_shows_a_user_policy():
    from crossprofile_lib import book
    plugins.load(str(EXAMPLE))
    e = book.explore("hospital-equipment-01", policy="Longest")
    assert "Longest" in e.view.policies
    choices = book.policy_choices([e.view])
    assert "Longest" in set(choices.columns.get_level_values("policy"))


def test_every_chapter_gets_the_policy_files_declared_or_not(tmp_path):
    """A chapter whose parameters cell does not name policy_files still reads the same reference grid."""
    from crossprofile_lib.book.build import execute
    md = tmp_path / "99-probe.md"
    md.write_text("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
                  "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
                  "```{code-cell} ipython3\n:tags: [parameters]\n\nseeds = None\n```\n\n"
                  "```{code-cell} ipython3\nprint('GOT', globals().get('policy_files'), seeds)\n```\n")
    execute(md, tmp_path, {"seeds": [3], "policy_files": ["x.py"], "templates": ["t"]}, tmp_path)
    nb = json.loads((tmp_path / "99-probe.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))
    assert "GOT ['x.py'] [3]" in text, text


def test_an_imported_run_brings_its_own_policy_file_or_is_refused_naming_it(tmp_path):
    """RUNS=folder whose results hold a user policy: the chapters rebuild memories, so the policy must
    be known. The book loads the file the run recorded when it is there unchanged (by SHA-256);
    otherwise the folder is refused before any chapter runs, naming it and POLICY_FILES (the near
    misses: a changed file, a missing file, never a silent unknown policy in chapter 7)."""
    from crossprofile_lib.book.experiments import BookRuns
    from crossprofile_lib.book.models import RunImportError, import_run
    from crossprofile_lib.book.params import BookParams
    from crossprofile_lib.policies.registry import parse_policy

    mine = tmp_path / "mine.py"
    mine.write_text(EXAMPLE.read_text())
    run = BookRuns(BookParams.quick(runs_root=str(tmp_path / "runs"), policy_files=[str(mine)])).reference()

    def forget():
        for d in (plugins.REGISTRY, plugins.PLUGINS):
            d.pop("Longest", None)
        plugins._LOADED.clear()

    forget()
    with pytest.raises(ValueError, match="unknown policy 'Longest'"):
        parse_policy("Longest")
    got = import_run(run.path)
    assert "Longest" in set(got.df.policy) and parse_policy("Longest-k7").base == "Longest"

    forget()
    mine.write_text(EXAMPLE.read_text() + "\n# edited\n")
    with pytest.raises(RunImportError, match=rf"RUNS={run.path}: .*Longest.*changed.*POLICY_FILES"):
        import_run(run.path)
    forget()
    mine.unlink()
    with pytest.raises(RunImportError, match=rf"RUNS={run.path}: .*Longest.*POLICY_FILES"):
        import_run(run.path)


def test_page_16_shows_an_imported_runs_own_policy_by_file_name(tmp_path):
    """A RUNS= folder made with a policy file, built without POLICY_FILES: page 16 shows its policy (it said 'no
    policy of your own'), and names the file by its name and SHA-256, never the machine's path."""
    from types import SimpleNamespace

    from crossprofile_lib import book
    from crossprofile_lib.book.params import BookParams
    f = tmp_path / "home" / "me" / "secret-project" / "keep_longest.py"
    f.parent.mkdir(parents=True)
    f.write_text(EXAMPLE.read_text())
    rec = {"origin": "file", "spec": str(f), "path": str(f), "policies": ["Longest"], "sha256": "ab" * 32}
    imported = SimpleNamespace(header={"policy_files": [rec]})
    plain = SimpleNamespace(header={"policy_files": []})
    ch = SimpleNamespace(params=BookParams.quick(runs_root=str(tmp_path / "runs")), shown=[plain, imported])
    assert book.user_policies_shown(ch) == ["Longest"]
    assert book.user_policies_shown(SimpleNamespace(params=ch.params, shown=[plain])) == []
    note = book.policy_files_note(ch.params, ch.shown)
    assert "<code>keep_longest.py</code>: Longest (SHA-256 <code>abababababab</code>; recorded by an imported run)" in note
    assert "secret-project" not in note and str(tmp_path) not in note
    # POLICY_FILES too: by file name as well, once per file (the same SHA-256 is listed once)
    with policy_registry_kept():
        p = BookParams.quick(runs_root=str(tmp_path / "runs"), policy_files=[str(f)])
        note = book.policy_files_note(p, [imported])
        assert note.count("keep_longest.py") == 2 and "POLICY_FILES" in note and str(tmp_path) not in note
