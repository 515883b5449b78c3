"""How a chapter shows things: boxes, numbered captions (:class:`Captions`, each ending with ONE short line naming the
backend and model of its runs; every figure labelled ``fig-<name>`` for ``{numref}``), :func:`show_figure` (figure,
caption, link to the notebook cell that made it), IPython's :func:`display`, :data:`HTML`, :data:`Markdown`, and what
a reader must never misread: a near-chance run (:func:`near_chance`, flagged with :data:`NEAR_CHANCE_FLAG` beside its
label by :func:`name_html` / :func:`name_text`) and an interval spanning about 0-100 (:func:`uninformative`, greyed in
tables; CSS kinds ``cp-flag`` / ``cp-uninformative``, book/_static/crossprofile.css)."""

from __future__ import annotations

import html
import importlib
import inspect
import re
from contextlib import suppress
from typing import Optional, Sequence

import pandas as pd

from crossprofile_lib.book.runs import REFERENCE, ROOT, Run, reference_who  # noqa: F401  (reference_who re-exported)
from crossprofile_lib.book.style import model_signal

#: Fewer templates than this and a run's intervals get a warning (k templates: at most C(2k-1, k) distinct resamples).
MIN_TEMPLATES_FOR_INTERVALS = 10


def near_chance_name(name: str) -> bool:
    """Whether a model's NAME is SmolLM2-135M's (the book decides from measured headroom, never a name)."""
    return "smollm2-135m" in name.lower()


def near_chance(run, boot=None) -> bool:
    """Whether a language model's run says nothing about the paper's effects, measured on the run: its headroom
    check fails or, without ALL and EMPTY rows, its accuracy is not above chance at 95%. Never the reference
    decider or a string label. Cached on the run."""
    if run is None or isinstance(run, str) or getattr(run, "is_reference", True) or not hasattr(run, "df"):
        return False
    boot = boot if boot is not None else getattr(run, "boot", None)
    cached = getattr(run, "_cp_near_chance", None)
    if cached is None or cached[0] is not boot:
        cached = (boot, not model_signal(run, boot).ok)
        with suppress(AttributeError):  # a frozen run: recompute next time
            run._cp_near_chance = cached
    return cached[1]


#: The flag set beside every number of a near-chance run (its label in a caption, a takeaway, a header).
NEAR_CHANCE_FLAG = "near chance: headroom check failed"
#: An interval at least this wide (points, on a 0-100 scale) says nothing about the estimate.
UNINFORMATIVE_WIDTH = 90.0


def name_html(run) -> str:
    """A run's label for a takeaway line (HTML), flagged at the number when it is near chance."""
    label = run if isinstance(run, str) else run.label
    flag = f' <span class="cp-flag">{NEAR_CHANCE_FLAG}</span>' if near_chance(run) else ""
    return html.escape(str(label)) + flag


def name_text(run) -> str:
    """A run's label for a table header or caption (plain text), flagged when it is near chance."""
    label = run if isinstance(run, str) else run.label
    return f"{label} ({NEAR_CHANCE_FLAG})" if near_chance(run) else str(label)


# --- the three marks (issue 52 item 1; glossary "The three marks") ------------------------------------------------
#: Every number this build sets beside a paper value carries one mark at the number: what produced it.
#: kind -> (the mark's words, the glossary term it links to, what it means)
MARKS = {
    "exact": ("exact", "term-exact", "no decider involved: what the memory keeps, the same for every decider"),
    "reference": ("ref. decider", "term-reference-decider-mark",
                  "the reference decider, a normative evidence counter: a mechanism, not a language model"),
    "model": ("LM", "term-language-model-mark", "a language model's decisions"),
}


def mark_kind(run) -> str:
    """``reference`` for the reference decider's run, ``model`` for a language model's."""
    return "reference" if getattr(run, "is_reference", False) else "model"


def _mark_words(kind: str, run=None) -> str:
    words = MARKS[kind][0]
    if kind == "model" and run is not None and not isinstance(run, str):
        words += f": {getattr(run, 'model', '?')}" + (", near chance" if near_chance(run) else "")
    return words


def mark(kind: str, run=None) -> str:
    """The mark (HTML) set right after a number: ``exact``, ``ref. decider`` or ``LM: <model>`` (``, near chance`` when
    the run is near chance), linked to its glossary entry."""
    words, anchor, meaning = MARKS[kind][0], MARKS[kind][1], MARKS[kind][2]
    words = _mark_words(kind, run)
    return (f'<a class="cp-mark cp-mark-{kind}" href="glossary.html#{anchor}" title="{html.escape(meaning)}">'
            f"{html.escape(words)}</a>")


def mark_text(kind: str, run=None) -> str:
    """The mark as plain text for a table cell: `` ‹exact›``, `` ‹ref. decider›``, `` ‹LM: <model>›``."""
    return f" ‹{_mark_words(kind, run)}›"


def quantity_mark_kind(unit: str, label: str, run) -> str:
    """The mark of a quantity: ``exact`` for what a memory keeps (facts) under a policy that makes no model call, else
    the run's (:func:`mark_kind`)."""
    model_call = any(k in label for k in ("R1-rel", "B3", "BAL", "REF")) and not getattr(run, "is_reference", False)
    return "exact" if unit == "facts" and not model_call else mark_kind(run)


def variants_phrase(run) -> str:
    """``"all eight variants"``, or ``"its 4 variants (of 8)"`` for a run that covers fewer (a model's sample)."""
    df = getattr(run, "df", None)
    k = int(df["variant"].nunique()) if df is not None and "variant" in df.columns and len(df) else 8
    return "all eight variants" if k >= 8 else f"its {k} variants (of 8)"


def run_mark(run) -> str:
    """The mark (HTML) of a number from ``run``."""
    return mark(mark_kind(run), run)


def uninformative(lo, hi, width: float = UNINFORMATIVE_WIDTH) -> bool:
    """Whether the interval [lo, hi] (points) spans about 0-100: it says nothing about the estimate."""
    try:
        return float(hi) - float(lo) >= width
    except (TypeError, ValueError):
        return False


_CI = re.compile(r"^\s*[-+]?\d+(?:\.\d+)?%?\s*\[\s*([-+]?\d+(?:\.\d+)?),\s*([-+]?\d+(?:\.\d+)?)\s*\]")


def uninformative_cell(value) -> bool:
    """Whether a table cell ``"est [lo, hi]"`` has an interval that spans about 0-100."""
    m = _CI.match(value) if isinstance(value, str) else None
    return bool(m) and uninformative(m.group(1), m.group(2))


def display(*objs, **kwargs) -> None:
    """IPython's ``display`` (a chapter imports only ``crossprofile_lib.book``)."""
    from IPython.display import display as show
    show(*objs, **kwargs)


def HTML(data: str):
    """IPython's ``HTML`` object."""
    from IPython.display import HTML as html_object
    return html_object(data)


def Markdown(data: str):
    """IPython's ``Markdown`` object."""
    from IPython.display import Markdown as md
    return md(data)


def esc(s) -> str:
    """HTML-escaped text (for run labels and reasons in a takeaway line)."""
    return html.escape(str(s))


def admonition(kind: str, title: str, body: str):
    """A visible box (``note``, ``warning``, ``important``, ``tip``) for Jupyter and the book; ``body`` is HTML."""
    return HTML(f'<div class="admonition {kind}"><p class="admonition-title">{html.escape(title)}</p>'
                 f"<p>{body}</p></div>")


def details(summary: str, body_html: str, open_: bool = False):
    """A collapsible HTML block (no JavaScript)."""
    return HTML(f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>{body_html}</details>")


def num(x, digits: int = 1, sign: bool = False, suffix: str = "") -> str:
    """A number for prose: ``"+12.3 points"``-style, or ``"n/a (not in this run)"`` when absent."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        v = float("nan")
    return "n/a (not in this run)" if v != v else f"{v:{'+' if sign else ''}.{digits}f}{suffix}"


def one_decimal(t: pd.DataFrame, names: Sequence[str]) -> dict:
    """A :meth:`Captions.table` ``fmt``: one decimal for the columns whose second level is in ``names``."""
    return {c: "{:.1f}" for c in t.columns if c[1] in names}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _labels(runs) -> str:
    """The caption line for ``runs``: Run objects (their short label) or strings used as they are."""
    runs = [r for r in (runs if isinstance(runs, (list, tuple)) else [runs]) if r is not None]
    if all(isinstance(r, str) for r in runs):  # also no runs: ""
        return " ".join(dict.fromkeys(runs))
    return "Backend and model: " + "; ".join(dict.fromkeys(name_text(r) for r in runs)) + "."


def notebook_name(chapter) -> str:
    """``4`` -> ``04-rarest-first`` (the chapter's notebook); the chapter itself when no file matches."""
    try:
        hits = sorted((ROOT / "notebooks").glob(f"{int(chapter):02d}-*.md"))
    except (TypeError, ValueError):
        hits = []
    return hits[0].stem if hits else str(chapter)


class Captions:
    """Numbered captions for one chapter (the landing page, ``intro``, numbers 0.1, 0.2, ...)."""

    def __init__(self, chapter: int | str):
        self.chapter = "0" if chapter == "intro" else chapter
        self._n = {"Figure": 0, "Table": 0}
        self._labels: set[str] = set()
        self.notebook = notebook_name(chapter)

    def _next(self, kind: str) -> str:
        self._n[kind] += 1
        return f"{kind} {self.chapter}.{self._n[kind]}"

    def text(self, kind: str, text: str, runs) -> str:
        return f"{self._next(kind)}. {text} {_labels(runs)}".strip()

    def label(self, name: Optional[str]) -> str:
        """``fig-<name>`` (a second figure of that name gets ``-2``); without a name ``fig-<notebook>-<n>``."""
        base = f"fig-{name}" if name else f"fig-{self.notebook}-{self._n['Figure']}"
        label, k = base, 1
        while label in self._labels:
            k += 1
            label = f"{base}-{k}"
        self._labels.add(label)
        return label

    def figure(self, text: str, runs, name: Optional[str] = None):
        """The next figure's caption: number, text, backend-and-model line, source link, label and number for ``{numref}``."""
        num = self._next("Figure")
        label = self.label(name)
        return HTML(f'<p class="caption cp-caption" data-cp-figure="{html.escape(label)}" '
                     f'data-cp-number="{num.split()[1]}"><strong>{num}.</strong> '
                     f"{html.escape((text + ' ' + _labels(runs)).strip())}{self.source_link()}</p>")

    def source_link(self) -> str:
        """`` [source]``: the downloadable notebook and the execution number of the cell running now."""
        try:
            from IPython import get_ipython
            n = get_ipython().execution_count
        except (ImportError, AttributeError):
            return ""
        return (f' <a class="cp-source" href="../_sources/book/{html.escape(self.notebook)}.ipynb" '
                f'title="the notebook this page was built from; the figure is made by its code cell [{n}]">'
                f"[source: {html.escape(self.notebook)}.ipynb, cell [{n}]]</a>")

    def table(self, df: pd.DataFrame, text: str, runs, fmt: Optional[str | dict] = None, precision: int = 1,
              gradient: Optional[Sequence[str]] = None, hide_index: bool = False, grey_near_chance: bool = False):
        """A Styler with the caption (optional 0-100 colour gradient over ``gradient``), every cell and label
        HTML-escaped (template text is user data), readable as printed (:func:`tidy_table`), near-chance runs
        flagged in the headers, intervals spanning about 0-100 greyed and marked. ``grey_near_chance``: a table of
        ONE run's numbers (no intervals, e.g. HiddenBench's per-policy tables) greys and marks every cell when that run
        is near chance."""
        old_cols = list(df.columns)
        df = tidy_table(_flag_headers(df, runs))
        new_of = dict(zip(old_cols, df.columns))
        if isinstance(fmt, dict):
            fmt = {new_of.get(k, k): v for k, v in fmt.items() if k in new_of}
        if gradient is not None:
            gradient = [new_of.get(g, g) for g in gradient]
        ints = [c for c in df.columns if _is_count(c, df[c])]
        if ints:
            base = fmt if isinstance(fmt, dict) else ({} if fmt is None else {c: fmt for c in df.columns})
            fmt = {**{c: "{:.0f}" for c in ints}, **{k: v for k, v in base.items() if k not in ints}}
        n_bad = int(sum(uninformative_cell(v) for v in df.to_numpy().ravel()))
        if n_bad:
            text = (f"{text} Greyed cells marked † ({n_bad}): the 95% interval spans {UNINFORMATIVE_WIDTH:g} points or "
                    "more (about 0-100), so the estimate says nothing; never read one as agreeing with the paper.")
        self._last = self.text("Table", text, runs)
        st = df.style.set_caption(html.escape(self._last))
        st = st.format(fmt, precision=precision, na_rep="–", escape="html")
        st = st.format_index(escape="html", axis=0).format_index(escape="html", axis=1)
        if gradient is not None:
            st = st.background_gradient(cmap="RdYlGn", subset=list(gradient), vmin=0, vmax=100)
        st = _mark_uninformative(st, df, runs)
        if grey_near_chance and any(near_chance(r) for r in (runs if isinstance(runs, (list, tuple)) else [runs])):
            st = st.set_td_classes(pd.DataFrame("cp-uninformative", index=df.index, columns=df.columns))
            st = st.format(lambda v: "–" if v is None or (isinstance(v, float) and v != v) else
                           (f"{v:.{precision}f} †" if isinstance(v, float) else f"{v} †"), escape="html")
            st = st.set_caption(html.escape(self._last + f" Greyed cells marked †: the run is near chance "
                                                         f"({NEAR_CHANCE_FLAG}), so none of its numbers says anything "
                                                         "about the paper's effects."))
        if hide_index:
            st = st.hide(axis="index")
        return st.set_table_styles([{"selector": "caption",
                                     "props": "caption-side: top; text-align: left; font-weight: bold;"}])


#: Column names that hold counts (printed as integers, never "1440.00").
COUNT_NAMES = ("n", "rows", "decisions", "tasks", "templates", "calls", "seeds", "claims", "lines", "count",
               "sessions", "resamples", "figures", "independent", "df")


def _name(c) -> str:
    return str(c[-1] if isinstance(c, tuple) else c).strip().lower()


def _is_count(c, col: pd.Series) -> bool:
    """An integer column, or a numeric column named like a count whose values are all whole numbers."""
    if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_numeric_dtype(col):
        return False
    if pd.api.types.is_integer_dtype(col):
        return True
    v = col.dropna()
    name = _name(c)
    return bool(len(v)) and bool((v == v.round()).all()) and (name in COUNT_NAMES or name.startswith(("n ", "number")))


def _label(x):
    """A header as a reader reads it: ``kept_support`` -> ``kept support``; a tuple's empty parts dropped."""
    if isinstance(x, tuple):
        parts = [str(v) for v in x if str(v).strip()]
        return " · ".join(_label(v) for v in parts) if parts else ""
    return x.replace("_", " ") if isinstance(x, str) and "_" in x and " " not in x.strip("_") and "/" not in x else x


#: Column names that hold p-values.
P_NAMES = ("p", "holm p", "p>|z|", "p > |z|", "p adjusted", "p-value", "p value", "pvalue")


def _p_value(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "< 0.0001" if str(v).strip() == "<1e-4" else v
    return v if f != f else ("< 0.001" if f < 1e-3 else f"{f:.3f}")


def tidy_table(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as a reader reads it: flat headers joined with " · ", no snake_case, booleans as Yes/No,
    p-value columns (:data:`P_NAMES`) as ``< 0.001`` or three decimals."""
    out = df.copy()
    cols = out.columns
    flat = (isinstance(cols, pd.MultiIndex) and any(not str(v).strip() for t in cols for v in t)) or \
        any(isinstance(c, tuple) for c in cols if not isinstance(cols, pd.MultiIndex))
    if flat:
        out.columns = pd.Index([_label(c) for c in cols])
    elif isinstance(cols, pd.MultiIndex):
        out.columns = pd.MultiIndex.from_tuples([tuple(_label(v) for v in t) for t in cols],
                                                names=[_label(n) for n in cols.names])
    else:
        out.columns = pd.Index([_label(c) for c in cols], name=_label(cols.name))
    out.index = out.index.set_names([_label(n) for n in out.index.names])
    for c in out.columns:
        col = out[c]
        if pd.api.types.is_bool_dtype(col) or (col.dtype == object and len(col.dropna())
                                                and col.dropna().map(lambda v: isinstance(v, bool)).all()):
            out[c] = col.map(lambda v: "Yes" if v is True or v == True else ("No" if v is False or v == False else v))  # noqa: E712
        elif _name(c) in P_NAMES:
            out[c] = col.map(_p_value)
    return out


def _flag_headers(df: pd.DataFrame, runs) -> pd.DataFrame:
    """``df`` with every column or row label that names a near-chance run flagged (:func:`name_text`)."""
    names = {r.label: name_text(r) for r in (runs if isinstance(runs, (list, tuple)) else [runs]) if near_chance(r)}
    return df.rename(index=names, columns=names) if names else df  # every level of a MultiIndex


def _mark_uninformative(st, df: pd.DataFrame, runs):
    """Grey (``cp-uninformative``) and mark with † every cell whose interval spans about 0-100."""
    bad = df.map(uninformative_cell)
    if not bad.to_numpy().any():
        return st
    st = st.set_td_classes(bad.replace({True: "cp-uninformative", False: ""}))
    return st.format(lambda v: f"{v} †" if uninformative_cell(v) else v, subset=list(df.columns[bad.any()]),
                     escape="html")


def show_figure(fig, caption) -> None:
    """Display a matplotlib figure, then its caption (with its source link); close the figure."""
    import matplotlib.pyplot as plt
    display(fig)
    plt.close(fig)
    display(caption)


def docstring_html(module: str) -> str:
    """A module's documentation as preformatted HTML (an import failure is said, not raised)."""
    try:
        doc = inspect.getdoc(importlib.import_module(module)) or "(no documentation)"
    except Exception as e:  # an optional backend may be missing here
        doc = f"(module {module} cannot be imported here: {type(e).__name__}: {e})"
    return (f"<p><code>{html.escape(module)}</code></p>"
            f"<pre style='white-space: pre-wrap'>{spec_links(html.escape(doc))}</pre>")


#: Section number of the project's specification -> the page and label of the book's own (chapter 3).
SPEC_SECTIONS = {"1": "intro.html", "2": "03-methods.html#spec-cells", "3": "03-methods.html#spec-cells",
                 "4": "03-methods.html#spec-pipeline", "5": "03-methods.html#spec-budgets",
                 "6": "03-methods.html#spec-policies", "7": "03-methods.html#spec-decision",
                 "8": "03-methods.html#spec-statistics", "9": "08-hiddenbench.html",
                 "10": "11-paper-vs-suite.html"}
_SPEC = re.compile(r"SPEC sections? (\d+)(?:-(\d+))?(, revised)?")


def spec_links(text_html: str) -> str:
    """``SPEC section N`` in HTML as a link to that section of the book's own specification (:data:`SPEC_SECTIONS`)."""
    def one(m):
        target = SPEC_SECTIONS.get(m.group(1))
        if target is None:
            return m.group(0)
        return f'<a href="{target}">the specification, section {m.group(1)}{"-" + m.group(2) if m.group(2) else ""}</a>'
    return _SPEC.sub(one, text_html)


#: The modules whose documentation states a choice the paper leaves open (chapter 3).
SILENT_CHOICES = (
    ("crossprofile_lib.task.tokenizer", "Tokenizer: a file-free default that prices labels like a byte-level BPE"),
    ("crossprofile_lib.task.variants", "Private facts: how they are dealt to agents; the classic and mirror cells"),
    ("crossprofile_lib.task.discussion", "Scripted discussion and claim list"),
    ("crossprofile_lib.task.budgets", "Budgets: what T_all prices"),
    ("crossprofile_lib.policies", "Policies: greedy first-fit, M1 rotation, fixed-k, formats"),
    ("crossprofile_lib.task.provenance", "Label controls and count-free formats"),
    ("crossprofile_lib.backends.ledger", "The reference decider, tie-breaking with common random numbers"),
    ("crossprofile_lib.policies.bal", "BAL, the balance-aware memory"),
    ("crossprofile_lib.task.evidence", "Net lead and irrelevant-fact tone"),
    ("crossprofile_lib.rng", "Seeded random streams"),
    ("crossprofile_lib.backends.llamacpp", "The embedded model and its decision mode"),
    ("crossprofile_lib.stats.netlead", "The net-lead regression"),
    ("crossprofile_lib.stats.socialproof", "The fitted social-proof weight"),
)


def data_source_box(hb):
    """The visible box naming HiddenBench's data source: the fixture or the user's file."""
    h = hb.header
    used, total = h.get("n_tasks"), h.get("n_tasks_in_file", h.get("n_tasks"))
    subset = f"; this run used {used} of its {total} valid tasks" if used != total else ""
    if isinstance(used, int) and used < MIN_TEMPLATES_FOR_INTERVALS:
        subset += (f"; its intervals resample only {_count(used, 'task')} and say little "
                   f"(fewer than {MIN_TEMPLATES_FOR_INTERVALS})")
    if h.get("data_is_fixture"):
        return admonition("warning", "Data source: the project's FIXTURE, not HiddenBench",
                          "These HiddenBench results were computed on <code>crossprofile_lib/resources/hiddenbench_fixture.json"
                          f"</code> (tasks written for this project in the public file's format{subset}). "
                          "They test the pipeline; they are not results on the public benchmark. Give the public "
                          "<code>benchmark_all_clean.json</code> with the parameter <code>hiddenbench_path</code> or "
                          "<code>HIDDENBENCH_PATH</code> (it is never bundled or copied).")
    return admonition("note", f"Data source: {html.escape(str(h.get('data_source')))}",
                      f"The user's HiddenBench file <code>{html.escape(str(h.get('data_path', '')).split('/')[-1])}</code> "
                      f"(sha256 {html.escape(str(h.get('data_sha256', ''))[:16])}…, {total} valid tasks, "
                      f"{len(h.get('malformed_records', []))} malformed{subset}), read in place.")
