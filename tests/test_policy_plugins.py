"""Your own memory policy (issue 22, item 3): crossprofile_lib/policies/plugins.py and --policy-file.

* the example of book/reference-policies.md (once the README's) runs as written (its blocks extracted, the
  commands run in a fresh folder);
* a plug-in policy is a policy like a built-in: its fixed-k and label controls, composition, stats with a
  contrast of its own in an extra prereg file, Holm-corrected with the family it names;
* run.json records the file's path and SHA-256; stats refuses a file that changed since the run;
* each malformed file gets exit 2, a message naming the file and the rule, no traceback, no output folder;
* an installed package's entry point (group crossprofile.policies) is found by name.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from policy_registry import policy_registry_kept

from crossprofile_lib.cli import main
from crossprofile_lib.policies import PolicyContext, parse_policy, plugins

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("crossprofile"))
SMALL = ["--templates", "templates/dev", "--seeds", "0", "--budgets", "0.6"]


@pytest.fixture(autouse=True)
def fresh_registry():
    """Each test starts from the built-ins alone (plug-ins registered by a test are removed after it)."""
    with policy_registry_kept():
        yield


#: The page that documents policies of your own (moved out of the README, issue 35; the book renders it).
POLICY_PAGE = ROOT / "book" / "reference-policies.md"


def readme_blocks() -> dict[str, str]:
    """The policy page's example blocks: marker -> the fenced block that follows it."""
    text = POLICY_PAGE.read_text()
    found = re.findall(r"<!-- readme-example: (\S+) -->\n```\w*\n(.*?)```", text, re.S)
    return dict(found)


def test_readme_example_is_the_shipped_file():
    blocks = readme_blocks()
    assert {"examples/policies/keep_longest.py", "examples/policies/keep_longest_prereg.yaml", "commands"} <= set(blocks)
    for name in ("examples/policies/keep_longest.py", "examples/policies/keep_longest_prereg.yaml"):
        assert blocks[name] == (ROOT / name).read_text(), f"{POLICY_PAGE.name}'s block differs from {name}"


def test_readme_example_runs_as_written(tmp_path):
    """Only the policy page's text: its files written into an empty folder, its commands run there."""
    blocks = readme_blocks()
    for name, body in blocks.items():
        if name != "commands":
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(body)
    commands = blocks["commands"].replace("\\\n", " ").strip().splitlines()
    outs = []
    for cmd in commands:
        argv = shlex.split(cmd)
        assert argv[0] == "crossprofile"
        r = subprocess.run([CLI, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        outs.append(r.stdout)
    df = pd.read_parquet(tmp_path / "runs/longest/results.parquet")
    assert {"Longest", "Longest-k7", "Longest:unlabeled"} <= set(df.policy)
    assert (df.loc[df.policy == "Longest-k7", "n_kept"] == 7).all()
    assert "Longest" in outs[1]                      # composition lists it
    assert re.search(r"Longest-R1 +exploratory", outs[2]), outs[2][:3000]   # stats estimates the user contrast
    header = json.loads((tmp_path / "runs/longest/run.json").read_text())
    (rec,) = header["policy_files"]
    path = tmp_path / "examples/policies/keep_longest.py"
    assert rec["path"] == str(path.resolve()) and rec["policies"] == ["Longest"]
    assert rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


# --- the example's rule, hand-checked -------------------------------------------------------------

def _claims(texts):
    from crossprofile_lib.task.discussion import Claim, ClaimList
    cs = tuple(Claim(t, ("A1",), i) for i, t in enumerate(texts))
    return ClaimList(cs, ("A1",))


def test_keep_longest_orders_longest_first_ties_by_first_mention():
    plugins.load(str(ROOT / "examples/policies/keep_longest.py"))
    order = parse_policy("Longest").policy.order
    cl = _claims(["bb", "aaaa", "cc", "d"])
    # longest first; the two 2-letter claims keep their first-mention order (not alphabetical, not reversed)
    assert order(cl, PolicyContext(np.random.default_rng(0))) == [1, 0, 2, 3]


# --- stats: the user contrast joins its family's Holm correction ------------------------------------

@pytest.fixture
def longest_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("longest")
    pol = d / "mine.py"
    pol.write_text((ROOT / "examples/policies/keep_longest.py").read_text())
    assert main(["run", "--policy-file", str(pol), "--policies", "Longest,R1,B4", *SMALL, "--out", str(d / "run")]) == 0
    return d, pol


def test_user_contrast_is_holm_corrected_with_its_family(longest_run, capsys):
    from statsmodels.stats.multitest import multipletests
    d, pol = longest_run
    capsys.readouterr()
    rc = main(["stats", str(d / "run"), "--prereg-extra", str(ROOT / "examples/policies/keep_longest_prereg.yaml"),
               "--json", "--resamples", "300", "--fit-resamples", "0", "--no-regressions", "--analysis-set", "all"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)["models"][0]
    con = pd.DataFrame(res["contrasts"])
    fam = con[(con.family == "exploratory") & con.estimable]
    assert "Longest-R1" in set(fam.id) and len(fam) >= 2
    _, padj, _, _ = multipletests(fam.p.to_numpy(float), alpha=0.05, method="holm")
    np.testing.assert_allclose(fam.p_adjusted.to_numpy(float), padj)
    # the estimate is the difference of the two cell means (points) at the primary budget
    rows = pd.read_parquet(d / "run/results.parquet")
    rows = rows[rows.budget_label == "0.6"]
    want = 100 * (rows[rows.policy == "Longest"].correct.mean() - rows[rows.policy == "R1"].correct.mean())
    assert float(fam.set_index("id").loc["Longest-R1", "estimate"]) == pytest.approx(want)


def test_prereg_extra_errors_name_the_extra_file(tmp_path):
    from crossprofile_lib.stats.prereg import PreregError, load_prereg
    bad = tmp_path / "extra.yaml"
    bad.write_text("contrasts:\n  - {id: H1, terms: [{weight: 1, where: {policy: R1}}]}\n")
    with pytest.raises(PreregError, match=r"extra.yaml: field 'contrasts\[0\].id': unique"):
        load_prereg(None, [bad])
    bad.write_text("contrasts:\n  - {id: X, family: nofam, terms: [{weight: 1}]}\n")
    with pytest.raises(PreregError, match=r"extra.yaml: field 'contrasts\[0\].family': declared"):
        load_prereg(None, [bad])
    bad.write_text("settings: {primary_budget: '0.4'}\ncontrasts: [{id: X, terms: [{weight: 1}]}]\n")
    with pytest.raises(PreregError, match=r"extra.yaml: field 'settings'"):
        load_prereg(None, [bad])


def test_stats_refuses_a_policy_file_changed_since_the_run(longest_run, tmp_path, capsys):
    import shutil
    d, pol = longest_run
    run = tmp_path / "copy"
    shutil.copytree(d / "run", run)
    header = json.loads((run / "run.json").read_text())
    changed = tmp_path / "changed.py"
    changed.write_text(pol.read_text() + "\n# edited\n")
    header["policy_files"][0].update(path=str(changed), policies=["LongestGone"])
    (run / "run.json").write_text(json.dumps(header))
    capsys.readouterr()
    assert main(["stats", str(run), "--resamples", "100", "--fit-resamples", "0", "--no-regressions"]) == 2
    err = capsys.readouterr().err
    assert "changed.py: hash:" in err and "Traceback" not in err


# --- malformed policy files: exit 2, the file and the rule named, nothing written -----------------

BAD = {
    "syntax": ("def order(:\n", "import", "SyntaxError"),
    "raises": ("import no_such_module_xyz\n", "import", "ModuleNotFoundError"),
    "noattr": ("X = 1\n", "attribute", "neither POLICY"),
    "notpolicy": ("POLICY = 'R1'\n", "type", "POLICY is a str, not a crossprofile_lib.policies.Policy"),
    "clash": ("from crossprofile_lib.policies import Policy\n"
              "POLICY = Policy('R1', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n", "clash", "built-in"),
    "fixedk": ("from crossprofile_lib.policies import Policy\n"
               "POLICY = Policy('Mine-k3', 'copy', order=lambda cl, ctx: list(range(len(cl))))\n", "name", "-kN"),
    "badkind": ("from crossprofile_lib.policies import Policy\nPOLICY = Policy('Mine', 'magic')\n", "import",
                "kind 'magic'"),
    "noorder": ("from crossprofile_lib.policies import Policy\nPOLICY = Policy('Mine', 'copy')\n", "attribute",
                "order=callable"),
    "nonexistent": ("from crossprofile_lib.policies import Policy\n"
                    "POLICY = Policy('Mine', 'copy', order=lambda cl, ctx: [0, 999])\n", "trial",
                    "claim 999, which does not exist"),
    "twice": ("from crossprofile_lib.policies import Policy\n"
              "POLICY = Policy('Mine', 'copy', order=lambda cl, ctx: [0, 0, 1])\n", "trial", "index twice"),
    "overbudget": ("from crossprofile_lib.policies import Policy\n"
                   "POLICY = Policy('Mine', 'copy', order=lambda cl, ctx: list(range(len(cl))),\n"
                   "                packer=lambda cl, order, budget, tok, ctx: list(order))\n", "trial",
                   "over its budget"),
    "foreign": ("from crossprofile_lib.policies import Policy\n"
                "from crossprofile_lib.task.discussion import Claim\n"
                "from crossprofile_lib.task.memory import Memory\n"
                "def build(spec, x):\n"
                "    c = Claim('an invented fact', ('A1',), 0)\n"
                "    return Memory(spec.name, 'claims', (c,), (1,), c.line(), 3)\n"
                "POLICY = Policy('Mine', 'unbudgeted', build=build)\n", "trial", "not in the claim list"),
    "crash": ("from crossprofile_lib.policies import Policy\n"
              "POLICY = Policy('Mine', 'copy', order=lambda cl, ctx: 1 / 0)\n", "trial", "ZeroDivisionError"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_policy_file_is_refused_before_any_work(case, tmp_path, capsys):
    body, rule, detail = BAD[case]
    f = tmp_path / f"{case}.py"
    f.write_text(body)
    out = tmp_path / "out"
    rc = main(["run", "--policy-file", str(f), "--policies", "R1", *SMALL, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"{f}: {rule}:" in err and detail in err, err
    assert "Traceback" not in err
    assert not out.exists()
    assert "Mine" not in plugins.PLUGINS and "Mine" not in plugins.REGISTRY  # nothing half-registered


def test_missing_policy_file_and_unknown_policy(tmp_path, capsys):
    rc = main(["run", "--policy-file", str(tmp_path / "nope.py"), "--policies", "R1", "--out", str(tmp_path / "o")])
    assert rc == 2 and "nope.py: exists: no such file" in capsys.readouterr().err
    rc = main(["run", "--policies", "NotLoaded", "--out", str(tmp_path / "o")])
    assert rc == 2 and "unknown policy 'NotLoaded'" in capsys.readouterr().err


def test_a_policy_misbehaving_only_in_the_run_stops_with_the_file_named(tmp_path, capsys):
    """The trial (two memories on one bundled template) passes; from the third call on the order returns a
    claim that does not exist: the run stops with the file named, as the trial would have."""
    f = tmp_path / "sly.py"
    f.write_text("from crossprofile_lib.policies import Policy\n"
                 "CALLS = []\n"
                 "def order(cl, ctx):\n"
                 "    CALLS.append(1)\n"
                 "    return [len(cl)] if len(CALLS) > 2 else list(range(len(cl)))\n"
                 "POLICY = Policy('Sly', 'copy', order=order)\n")
    out = tmp_path / "o"
    rc = main(["run", "--policy-file", str(f), "--policies", "Sly", *SMALL, "--variants", "PSP", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{f}: memory: policy 'Sly' returned claim" in err and "Traceback" not in err, err
    assert not (out / "results.parquet").exists()


def test_module_object_and_entry_point(tmp_path):
    """``module:object`` and an installed package's entry point, each in a fresh process."""
    (tmp_path / "mypol.py").write_text(textwrap.dedent("""
        from crossprofile_lib.policies import Policy
        def order(cl, ctx):
            return list(range(len(cl)))[::-1]
        LATEST = Policy("Latest", "copy", "last mention first", order=order)
        EP = [Policy("EPLatest", "copy", "entry-point copy", order=order)]
    """))
    dist = tmp_path / "mypol-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mypol\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[crossprofile.policies]\nlatest = mypol:EP\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([CLI, "run", "--policy-file", "mypol:LATEST", "--policies", "Latest,EPLatest,EPLatest-k3",
                        *SMALL, "--variants", "PSP", "--out", str(tmp_path / "o")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    header = json.loads((tmp_path / "o/run.json").read_text())
    origins = {tuple(s["policies"]): s["origin"] for s in header["policy_files"]}
    assert origins == {("Latest",): "module", ("EPLatest",): "entry point"}
    assert set(pd.read_parquet(tmp_path / "o/results.parquet").policy) == {"Latest", "EPLatest", "EPLatest-k3"}


def test_one_file_under_two_spellings_is_one_source_and_another_file_still_clashes(tmp_path, monkeypatch):
    """POLICY_FILES=../mypol/p.py beside a RUNS= folder that recorded /abs/mypol/p.py: the same file, loaded once
    (it clashed with itself); a different file defining the same name, or the same path edited, still clashes."""
    (tmp_path / "mypol").mkdir()
    (tmp_path / "work").mkdir()
    f = tmp_path / "mypol" / "p.py"
    f.write_text((ROOT / "examples" / "policies" / "keep_longest.py").read_text())
    monkeypatch.chdir(tmp_path / "work")
    a = plugins.load("../mypol/p.py")
    b = plugins.load(str(f))
    assert a is b and a.policies == ("Longest",) and a.path == str(f.resolve())
    other = tmp_path / "other.py"
    other.write_text(f.read_text())
    with pytest.raises(plugins.PolicyFileError, match="clash: policy name 'Longest' is already registered"):
        plugins.load(str(other))
    f.write_text(f.read_text() + "\n# edited\n")
    with pytest.raises(plugins.PolicyFileError, match="clash"):
        plugins.load(str(tmp_path / "work" / ".." / "mypol" / "p.py"))
