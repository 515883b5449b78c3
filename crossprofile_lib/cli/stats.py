"""``crossprofile stats DIR``: the paper's inference (SPEC section 8) over a run's results table, as a text
report (:func:`print_report`) or, with ``--json``, everything (every budget) as JSON."""

from __future__ import annotations

import json
import sys

from crossprofile_lib.cli import args as A
from crossprofile_lib.design import CLASSIC, MIRROR, PRIMARY_BUDGET


def _cmd_stats(args) -> int:
    from crossprofile_lib.run.results import ResultsError, read_header, read_results, run_folder
    from crossprofile_lib.stats.analysis import analyse, to_jsonable
    from crossprofile_lib.stats.contrasts import PreregError, load_prereg
    try:
        df = read_results(args.dir)
        prereg = load_prereg(args.prereg, args.prereg_extra)
    except (ResultsError, PreregError) as e:
        return A.fail(e, 2)
    try:
        header = read_header(args.dir)
    except ResultsError as e:
        if (run_folder(args.dir) / "run.json").exists() and not args.trust_edited:  # there but damaged
            return A.fail(f"{e}; restore the run's run.json (or rerun the grid) before its statistics", 2)
        print(f"notice: {e}; the social-proof fit rebuilds nothing without it", file=sys.stderr)
        header = None
    from crossprofile_lib.run.verify import EditedTable, check_or_trust
    try:  # the table against its run.json (rows, template hashes, the answer key, value ranges)
        unverified = check_or_trust(df, header, f"{run_folder(args.dir)}/results.parquet", args.trust_edited,
                                    args.templates or ())
    except EditedTable as e:
        return A.fail(e, 2)
    if unverified:
        print(f"warning: {unverified}", file=sys.stderr)
    header = header if isinstance(header, dict) else {}
    config = header.get("config")
    config = config if isinstance(config, dict) else None
    args.dir = str(run_folder(args.dir))  # a results.parquet named directly: its folder
    from crossprofile_lib.policies.plugins import PolicyFileError, ensure_recorded
    try:  # the run's own policies: from the files run.json records (same SHA-256), or --policy-file
        ensure_recorded(header.get("policy_files"), f"{args.dir}/run.json")
    except PolicyFileError as e:
        return A.fail(e, 2)
    from crossprofile_lib.stats.analysis_set import FailedCallsError, fallback_lines, prepare, relevance_fallback
    try:
        rows, prepared = prepare(df, args.allow_errors, args.analysis_set, source=f"{args.dir}/results.parquet")
    except FailedCallsError as e:
        return A.fail(e, 1)
    if prepared["failed_calls"]:
        print(f"notice: {prepared['failed_calls']}", file=sys.stderr)
    if rows.empty:
        return A.fail(f"{args.dir}/results.parquet: no decisions left to analyse", 1)
    try:
        from crossprofile_lib.run.rebuild import choice_data_rebuilder, rebuild_inputs_key
        from crossprofile_lib.stats.cache import FitCache
        cache = FitCache.for_run(args.dir, enabled=not args.no_cache)
        choice = choice_data_rebuilder(rows, config, args.templates, prereg.settings["social_proof_where"])
        res = analyse(rows, prereg, n_resamples=args.resamples, seed=args.seed, choice_data=choice,
                      regressions=not args.no_regressions, fit_resamples=args.fit_resamples, rows=prepared,
                      cache=cache, choice_key=rebuild_inputs_key(config, args.templates))
    except PreregError as e:
        return A.fail(e, 2)
    if cache.write_error:
        print(f"notice: {cache.write_error} (fits not cached)", file=sys.stderr)
    fb = relevance_fallback(rows)
    if args.json:
        doc = {"run": str(args.dir), "models": res, "relevance_fallback": fb}
        if unverified:
            doc = {"verified": False, "unverified": unverified, **doc}
        print(json.dumps(to_jsonable(doc), indent=1))
    else:
        if unverified:
            print(f"!! {unverified}")
        for r in res:
            print_report(r, str(prereg.settings["primary_budget"]))
        for line in fallback_lines(fb):
            print(line)
    return 0


def _budget_rows(t, primary: str):
    return t[t["budget_label"].isin([primary, "none"])] if "budget_label" in t.columns else t


def print_report(res: dict, primary: str = PRIMARY_BUDGET) -> None:
    """Per backend/model: the analysis set, headroom, the preregistered contrasts (Holm), accuracy, the classic
    and mirror cells, composition, relevance filter, label effects, shared minus private support, accuracy by
    net lead with the regressions and their verdict, and the fitted social-proof weight."""
    import pandas as pd

    from crossprofile_lib.stats.format import ci_column, ci_pivot, fmt_ci, fmt_p
    from crossprofile_lib.stats.netlead import FITS
    w = print
    w(f"== {res['backend']} / {res['model']}" + (f"  ({res['note']})" if res.get("note") else ""))
    w(f"   {res['n_templates']} templates, {res['n_decisions']} decisions, tokenizer {res['tokenizer']}; "
      f"template bootstrap, {res['resamples']} resamples, seed {res['seed']}, "
      f"{round(100 * res['level'])}% percentile intervals")
    a = res.get("analysis_set") or {}
    if a:
        w(f"   analysis set: {a['name']} ({a['n_templates']} templates; {a['rule']}"
          + (f"; {a['rows_dropped']} rows of {a['development_templates']} development templates dropped"
             if a.get("rows_dropped") else "") + ")")
    if res.get("failed_calls"):
        w(f"   notice: {res['failed_calls']}")
    h = res["headroom"]
    w(f"   headroom: ALL - EMPTY = {fmt_ci(h['estimate'], h['lo'], h['hi'])} points (lower bound must exceed "
      f"{h['min_points']:g}): {'passed' if h['passed'] else 'FAILED'}")
    w(f"   results are {res.get('status_label', h['status'])}")
    w()
    w(f"Preregistered contrasts ({res['prereg']}; p adjusted within family)")
    rows, why = [], []   # a contrast not estimable gets a note number; its reason is printed under the table
    for r in res["contrasts"].itertuples():
        paper = ", ".join(f"{k} {v}" for k, v in (r.paper or {}).items())
        fam = r.family if r.family != "confirmatory" or res.get("status", "confirmatory") == "confirmatory" \
            else "confirmatory (run exploratory)"
        if not r.estimable:
            why.append(f"   [{len(why) + 1}] {r.id}: {r.reason}")
        rows.append(dict(id=r.id, family=fam, estimate=fmt_ci(r.estimate, r.lo, r.hi) if r.estimable else
                         f"not estimable [{len(why)}]", p=fmt_p(r.p), p_adj=fmt_p(r.p_adjusted),
                         reject=("yes" if r.reject else "no") if r.estimable and r.family else "",
                         paper=paper, title=r.title))
    w(pd.DataFrame(rows).to_string(index=False))
    if why:
        w("   not estimable:")
        for line in why:
            w(line)
    w("   paper = the paper's reported values (SPEC sections 8, 10), not results of this run")
    w()
    w("Accuracy (%) per policy x budget x variant")
    w(ci_pivot(res["accuracy"], ["policy", "budget_label"], "variant").to_string())
    w()
    w(f"Classic ({CLASSIC}) and mirror ({MIRROR}) cells at budget {primary} and unbudgeted: accuracy and decoy "
      "choice (%); 'pooled' = PS* / SP* (both irrelevant levels), secondary")
    w(f"   mirror = {MIRROR} is our reading (the paper does not state the mirror cell's irrelevant level; {MIRROR} "
      "swaps every holder of the classic cell)")
    cells = _budget_rows(res["cells"], primary)
    if not cells.empty:
        cells = cells.assign(col=cells["outcome"].map({"correct": "accuracy", "chose_decoy": "chose decoy"})
                             + " " + cells["cell"])
        w(ci_pivot(cells, ["policy", "budget_label"], "col").to_string())
    w()
    w(f"Kept composition (mean facts kept; retention = kept support / 5) at budget {primary} and unbudgeted")
    comp = _budget_rows(res["composition"], primary)
    if not comp.empty:
        comp = comp.assign(col=comp["outcome"].str.replace("kept_", "") + " " + comp["cell"])
        comp = comp[comp["cell"].isin(["classic", "mirror", "all", "classic (pooled)", "mirror (pooled)"])]
        w(ci_pivot(comp, ["policy", "budget_label"], "col", digits=2).to_string())
    w()
    rel = res["relevance"]
    w("Relevance filter precision / recall (%) against the roles")
    w(ci_pivot(rel, ["relevance_filter"], "outcome").to_string() if not rel.empty else "   (no relevance-filter rows)")
    w()
    le = res["label_effects"]
    w("Label effects: label control minus labelled policy (points)")
    w(ci_pivot(le.assign(col=le["cell"]), ["policy", "budget_label"], "col").to_string() if not le.empty
      else "   (no label-control policies in this run)")
    w()
    ss = res["support_shared_minus_private"]
    w("ALL memory: accuracy with support shared minus support private (points)")
    w(ss.assign(estimate=ci_column(ss), p=ss["p"].map(fmt_p))[["policy", "n", "estimate", "p"]].to_string(index=False)
      if not ss.empty else "   (no ALL rows)")
    w()
    nl = res["net_lead"]
    w(f"Accuracy (%) by net evidence lead (rows: {nl['where'] or 'all'}; {nl['n']} decisions); "
      f"never falls as net lead rises: {'yes' if nl['nondecreasing'] else 'NO'}")
    t = nl["by_net_lead"]
    w(t.assign(accuracy=ci_column(t))[["net_lead", "n", "accuracy"]].to_string(index=False))
    fam = nl.get("families", {})
    if fam.get("primary"):
        f0 = fam["primary"]
        w(f"   Regressions, primary family: {f0['family']} ({f0['n']} decisions; reference policy {f0['reference']})"
          + (f"; {f0['note']}" if f0.get("note") else ""))
    for key, role in FITS:
        if key not in nl:
            continue
        m = nl[key]
        w(f"   [{role}] {m['method']}: {m['formula']} (reference policy {m['reference_policy']})")
        if isinstance(m["terms"], pd.DataFrame) and not m["terms"].empty:
            cols = [c for c in ("term", "coef", "sd", "z", "p", "p_holm") if c in m["terms"].columns]
            w(m["terms"][cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        if m.get("error"):
            w(f"   {m['error']}")
        elif key == "ml":
            lr, wt = m.get("lr"), m.get("wald_test")
            w(f"   template random-intercept SD {m['template_sd']:.3f}; log-likelihood {m['llf']:.2f}"
              + (f"; likelihood-ratio test of the policy block: chi2 = {lr['chi2']:.1f}, df = {lr['df']}, "
                 f"p = {fmt_p(lr['p'])}" if lr else "")
              + (f" (joint Wald: chi2 = {wt['chi2']:.1f}, p = {fmt_p(wt['p'])})" if wt else "")
              + f"; significant: {m['policy_significant']}")
        elif key == "mixed":
            w(f"   template random-intercept SD {m['template_sd']:.3f}; policy terms significant after Holm: "
              f"{m['policy_significant']}")
        elif m.get("wald") or m.get("lr"):
            wd = m.get("wald") or m.get("lr")
            w(f"   {'joint Wald' if m.get('wald') else 'likelihood-ratio'} test of the policy terms: chi2 = "
              f"{wd['chi2']:.1f}, df = {wd['df']}, p = {fmt_p(wd['p'])}; significant: {m['policy_significant']}")
        if m.get("flat_templates"):
            w(f"   {m['flat_templates']} template(s) all correct or all wrong: no information under fixed effects, dropped")
        for msg in m.get("warnings", []):
            if "separation" in msg:
                w(f"   note: {msg}")
    if fam.get("secondary"):
        f1 = fam["secondary"]
        w(f"   Secondary family: {f1['family']} ({', '.join(f1['policies'])} tested; {f1['n']} decisions)"
          + (f"; {f1['note']}" if f1.get("note") else ""))
        sep = f1.get("separated")
        if isinstance(sep, pd.DataFrame) and not sep.empty:
            w("   separated levels, reported apart (a coefficient there is infinite, so no test is run on it):")
            w(sep.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    v = nl.get("verdict")
    if isinstance(v, pd.DataFrame) and not v.empty:
        sig = nl.get("policy_significant")
        name = fam.get("primary", {}).get("family", "")
        w("   Verdict: policy terms " + ("stay significant" if sig else "are not significant" if sig is False
                                         else "could not be tested")
          + " once net lead and irrelevant tone are controlled (the headline is the primary fit, template fixed "
            "effects" + (f", family {name}" if name else "") + ")"
          + (f"; the paper's model (ML random intercept) says: {'significant' if ml_sig else 'not significant'}"
             if (ml_sig := nl.get("ml", {}).get("policy_significant")) is not None else ""))
        cols = [c for c in ("family", "fit", "role", "test", "statistic", "df", "p", "policy_significant",
                            "agrees_with_primary") if c in v.columns]
        vv = v[cols].copy()
        if "p" in vv:
            vv["p"] = vv["p"].map(fmt_p)
        w(vv.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    w()
    sp = res["social_proof"]
    w("Fitted decider parameters (conditional logit; beyond the paper): score = sum polarity * w_f * (1 + s*(n-1)), "
      "P = softmax(beta * score)")
    if "skipped" in sp:
        w(f"   skipped: {sp['skipped']}")
    elif sp.get("n_decisions", 0) == 0:
        w(f"   {sp.get('note', 'no decisions')}")
    else:
        tb = sp["table"]
        w(tb.assign(estimate=[fmt_ci(e, l, h, 3) for e, l, h in zip(tb.estimate, tb.lo, tb.hi)],
                    p=tb["p"].map(fmt_p))[["parameter", "estimate", "p", "at_bound"]].to_string(index=False))
        info = sp.get("rebuild", {})
        w(f"   {sp['n_decisions']} decisions ({sp['n_patterns']} distinct patterns), {sp['resamples']} bootstrap fits"
          + (f"; left out: {info.get('invalid', 0)} invalid, {info.get('memory_mismatch', 0)} memories not "
             f"rebuilt identically, {info.get('not_rebuilt', 0)} not rebuilt" if info else ""))
        if sp.get("note"):
            w(f"   note: {sp['note']}")
    w()


COMMAND = "stats"
HELP = ("template-bootstrap inference: preregistered contrasts (Holm), tables, net-lead regressions, "
        "fitted social-proof weight")


def register(sub) -> None:
    from crossprofile_lib.stats.analysis_set import ANALYSIS_SETS
    from crossprofile_lib.stats.cache import CACHE_DIRNAME
    s = sub.add_parser(COMMAND, help=HELP)
    s.add_argument("dir", type=A.path_name, help="a run folder (results.parquet + run.json), or its results.parquet")
    s.add_argument("--json", action="store_true", help="print everything as JSON (all budgets)")
    s.add_argument("--prereg", type=A.input_file, help="contrast file (default: the repository's prereg.yaml)")
    s.add_argument("--prereg-extra", action="append", default=[], metavar="FILE", type=A.input_file,
                   help="an extra contrast file merged into --prereg (repeatable): contrasts of your own, e.g. "
                        "'Mine - R1', in a family of either file (Holm-corrected with it)")
    s.add_argument("--resamples", type=A.int_between(1, A.MAX_RESAMPLES), default=10_000,
                   help=f"bootstrap resamples (default 10000; at most {A.MAX_RESAMPLES})")
    s.add_argument("--seed", type=A.seed, default=0, help="seed of the resample index matrix (default 0)")
    s.add_argument("--fit-resamples", type=A.int_between(0, A.MAX_FIT_RESAMPLES), default=1000,
                   help="bootstrap fits for the social-proof weight (first N resamples; default 1000; 0 skips)")
    s.add_argument("--no-regressions", action="store_true",
                   help="skip the net-lead regressions (fixed effects, ML and Bayesian random intercept, GEE)")
    s.add_argument("--allow-errors", action="store_true",
                   help="drop rows whose model call failed (column 'error' set) instead of refusing the run")
    s.add_argument("--analysis-set", choices=ANALYSIS_SETS, default=ANALYSIS_SETS[0],
                   help="formal (default): confirmatory statistics on the formal templates only (ids of the files "
                        "under templates/formal/), development templates dropped; all: every template (exploratory)")
    s.add_argument("--no-cache", action="store_true",
                   help=f"refit the regressions and the social-proof weight instead of reading them from "
                        f"DIR/{CACHE_DIRNAME}/ (keyed by the table's hash, options and code)")
    s.add_argument("--templates", type=A.template_path, nargs="+", default=None,
                   help="template paths to rebuild memories from (default: those in run.json)")
    s.add_argument("--trust-edited", action="store_true",
                   help="analyse a table that does not match its run.json (rows, template hashes, answer key, value "
                        "ranges; otherwise refused naming the first bad row), marked UNVERIFIED in every output")
    A.add_policy_file_option(s)
    s.set_defaults(func=_cmd_stats)
