"""``crossprofile fit-paper``: the reference decider fitted to the paper's published figures (not a model run), every
table of :mod:`crossprofile_lib.paperfit` as text or JSON."""

from __future__ import annotations

import json
import math
import sys

from crossprofile_lib.cli import args as A


def _num(x, d=1) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def _interval(lo, hi, d=1) -> str:
    return "" if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)) else f"[{lo:.{d}f}, {hi:.{d}f}]"


def _p_value(p) -> str:
    return "" if p is None or (isinstance(p, float) and math.isnan(p)) else "p < 0.001" if p < 1e-3 else f"p = {p:.3f}"


def print_report(res, recovery: bool = False) -> None:
    info = res.info
    sec = info.get("seconds", {})
    how = ("read from the cache" if info.get("fit_cache_hit") else
           f"computed in {sec.get('total', float('nan')):.1f} s (ledger grid "
           f"{'from the cache' if info.get('cache_hit') else 'built'})")
    p = print
    p(f"crossprofile fit-paper: {res.title}")
    p(f"backend ledger (the reference decider, not a language model) on {info['n_templates']} templates "
      f"({', '.join(info['templates'])}), seeds {','.join(map(str, info['seeds']))}: {info['n_decisions']} "
      f"decisions, expected outcomes computed analytically, memories priced with tokenizer "
      f"{info.get('tokenizer', 'offline-bpe-approx-v1')}; {how}")
    if not info.get("tokenizer_spec"):
        p("notice: priced with the offline approximation; the paper's models price with their own tokenizers "
          "(--tokenizer)")
    tr = info.get("template_resamples", 0)
    p(f"intervals: {info['resamples']} parametric-bootstrap refits per model (the paper's figures redrawn from the "
      f"fitted decider at the paper's sample sizes, n per figure below, binomial; seed {info['boot_seed']})"
      + (f"; {tr} template-bootstrap refits (the paper's values held fixed: dependence on this suite's templates)"
         if tr else ""))
    p("")
    p(f"Fitted parameters ({res.title}): estimate, 95% parametric-bootstrap interval, profile interval"
      + (", template-bootstrap interval" if tr else ""))
    t = res.params.copy()
    if t.empty:
        p("  no model column has 3 or more predictable figures")
    else:
        t["bootstrap"] = [_interval(a, b, 3) for a, b in zip(t.lo, t.hi)]
        t["profile"] = [_interval(a, b, 3) for a, b in zip(t.profile_lo, t.profile_hi)]
        cols = ["model", "parameter", "estimate", "bootstrap", "profile"]
        if tr and "template_lo" in t:
            t["templates"] = [_interval(a, b, 3) for a, b in zip(t.template_lo, t.template_hi)]
            cols.append("templates")
        t["estimate"] = [f"{v:.3f}" + (" (at bound)" if ab else "") for v, ab in zip(t.estimate, t.at_bound)]
        p(t[cols].to_string(index=False))
    for full, f in info.get("fits", {}).items():
        p(f"  {full}: {f['model']}; {f['n_figures']} figures, {f.get('n_independent', '?')} independent against 3 "
          f"parameters; RMSE {f['rmse']:.1f} points")
        if "chi2" in f:
            df = f["df"]
            fit_word = ("" if df <= 0 else "; the misses are beyond the paper's sampling noise, so the profile "
                        f"interval (scaled by chi2/df = {f['chi2'] / df:.1f}) is the one to read" if f["p_fit"] < 0.05
                        else "; the misses are within the paper's sampling noise")
            p(f"    chi-squared {f['chi2']:.1f} on {df} df"
              + (f" ({_p_value(f['p_fit'])}){fit_word}" if df > 0 else " (no figure left to test the fit)"))
        for g, refs in enumerate(f.get("linked_groups", []), 1):
            p(f"    linked group {g} (counted by its independent part): {', '.join(refs)}")
        if f.get("inconsistency", 0) > 0.05 + 1e-9:
            p(f"    the paper's values of the linked figures disagree with each other by {f['inconsistency']:.1f} "
              "points (a part no parameter can fit; ignored by the weighted loss)")
    for a in info.get("aliases", []):
        p(f"  same prediction: {a}")
    for m, g in res.figures.groupby("model", sort=False):
        p("")
        p(f"Figures, {m} ({res.title}): paper = the paper's value; n = the paper's decisions per term (* from "
          f"this suite's design where the paper does not give it); sd = its sampling SD; fit = the reference "
          f"decider at {m}'s fitted parameters [95% parametric-bootstrap interval]; z = residual / sd; loo = "
          "prediction from a fit without that figure")
        g = g.assign(fit=[f"{_num(v)} {_interval(a, b)}" for v, a, b in zip(g.fit, g.lo, g.hi)],
                     paper=g.paper.map(_num), residual=g.residual.map(_num), loo=g.loo.map(_num),
                     n=[f"{v:.0f}" + ("" if s == "paper" else "*") for v, s in zip(g.n, g.n_source)],
                     sd=g.sd.map(_num), z=g.z.map(_num))
        p(g[["figure", "unit", "paper", "n", "sd", "fit", "residual", "z", "loo", "linked", "role"]]
          .to_string(index=False))
    if not res.memory.empty:
        p("")
        p(f"Parameter-free figures ({res.title}): what the reference decider's memories keep (oracle relevance "
          "filter); s, w and beta do not enter")
        m = res.memory.assign(paper=res.memory.paper.map(lambda v: _num(v, 2)),
                              ledger=[f"{_num(v, 2)} {_interval(a, b, 2)}" for v, a, b in
                                      zip(res.memory.ledger, res.memory.lo, res.memory.hi)])
        p(m[["figure", "unit", "paper_model", "paper", "ledger"]].to_string(index=False))
    if recovery and not res.recovery.empty:
        p("")
        p(f"Recovery check ({res.title}; here the 'paper' figures are generated by the reference decider at known "
          f"parameters with the paper's binomial noise at its sample sizes, rounded to 0.1, and refitted; "
          "fit = median of the refits [95% range])")
        r = res.recovery
        rows = {"model": r.model}
        for k in ("social_proof", "irrelevant_weight", "inverse_temperature"):
            rows[f"{k} true"] = r[f"{k}_true"].map(lambda v: f"{v:.3f}")
            rows[f"{k} fit"] = [f"{v:.3f} {_interval(a, b, 3)}" if f"{k}_lo" in r else f"{v:.3f}"
                                for v, a, b in zip(r[f"{k}_fit"], r.get(f"{k}_lo", r[f"{k}_fit"]),
                                                   r.get(f"{k}_hi", r[f"{k}_fit"]))]
        import pandas as pd
        p(pd.DataFrame(rows).to_string(index=False))


def _cmd_fit_paper(args) -> int:
    from pathlib import Path

    from crossprofile_lib.paperfit import fit_paper
    from crossprofile_lib.safety.outputs import WriteError
    from crossprofile_lib.task.templates import TemplateError
    from crossprofile_lib.task.tokenizer import get_tokenizer
    if args.cache is not None and Path(args.cache).exists() and not Path(args.cache).is_dir():
        args.parser.error(f"argument --cache: '{args.cache}' is a file, not a folder (the fit is cached in a folder)")
    try:
        get_tokenizer(args.tokenizer)      # a bad spec or a missing file: a clear error before any work
    except (ValueError, OSError, ImportError) as e:
        return A.fail(f"--tokenizer {args.tokenizer}: {e}", 2)
    try:
        res = fit_paper(templates=args.templates, seeds=args.seeds, resamples=args.resamples, boot_seed=args.boot_seed,
                        cache_dir=args.cache, use_cache=not args.no_cache, tokenizer=args.tokenizer,
                        template_resamples=args.template_resamples, recovery_draws=args.recovery_draws)
    except (TemplateError, FileNotFoundError) as e:  # a broken template in the folder: named, exit 2
        return A.fail(e, 2)
    except (WriteError, OSError) as e:  # the cache folder cannot be written (full disk, read-only)
        return A.fail(f"the fit cache {args.cache or 'folder'} cannot be written ({e}); use --no-cache or another --cache", 1)
    if args.json:
        doc = dict(title=res.title, info=res.info,
                   **{k: getattr(res, k).to_dict(orient="records")
                      for k in ("params", "figures", "memory", "profiles", "recovery")})
        json.dump(doc, sys.stdout, indent=1, default=str)
        print()
    else:
        print_report(res, recovery=args.recovery)
    return 0


COMMAND = "fit-paper"
HELP = "fit the reference decider to the paper's published figures (not a model run)"


def register(sub) -> None:
    f = sub.add_parser(COMMAND, help=HELP,
                         description="Fit the reference decider to the paper's published figures (not a model run).")
    f.add_argument("--templates", type=A.template_path, nargs="+", default=["templates/formal"],
                   help="template files or folders (default templates/formal, the 60 formal templates)")
    f.add_argument("--seeds", type=A.seeds, default="0,1,2", help="distinct seeds (default 0,1,2)")
    f.add_argument("--resamples", type=A.int_between(0, A.MAX_FIT_RESAMPLES), default=1000,
                   help="parametric-bootstrap refits per model: the paper's figures redrawn at the paper's sample "
                        "sizes (default 1000; 0: no intervals)")
    f.add_argument("--template-resamples", type=A.int_between(0, A.MAX_FIT_RESAMPLES),
                   default=0, help="also template-bootstrap refits per model (the paper's values held fixed: how much "
                                   "the fit depends on this suite's templates; default 0, none)")
    f.add_argument("--recovery-draws", type=A.int_between(1, 10_000), default=20,
                   help="redrawn figure sets per known parameter point in the recovery check (default 20)")
    f.add_argument("--tokenizer", default=None,
                   help="how the design's memories are priced, as for 'crossprofile run': offline (default, the "
                        "file-free approximation), gguf:PATH, hf:FOLDER, PATH/tokenizer.json, or a tokenizer name "
                        "'crossprofile run --tokenizer' accepts (the paper's models price with their own)")
    f.add_argument("--boot-seed", type=A.seed, default=0, help="bootstrap seed (default 0)")
    f.add_argument("--cache", type=A.path_name, default=None,
                   help="cache folder (default: paperfit/ in the call-cache folder: $CROSSPROFILE_CACHE, else "
                        "./.crossprofile_cache if it exists, else the user cache folder)")
    f.add_argument("--no-cache", action="store_true", help="recompute the fit (the ledger grid is still read from the cache)")
    f.add_argument("--recovery", action="store_true", help="also print the recovery check")
    f.add_argument("--json", action="store_true", help="print every table as JSON")
    f.set_defaults(func=_cmd_fit_paper, parser=f)
