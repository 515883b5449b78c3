"""The book's library: everything a chapter notebook (``notebooks/*.md``) calls, in one namespace.

* :mod:`.runs` -- run folders (:class:`Run`), made or found by configuration, never overwritten
  by another configuration; :mod:`.hbruns` -- HiddenBench run folders;
* :mod:`.experiments` -- the book's parameters (:data:`DEFAULTS`) and every run of one parameter
  set (:class:`BookRuns`, with the reasons a run is missing);
* :mod:`.chapter` -- ONE chapter preamble, :func:`setup`;
* :mod:`.display` -- boxes, captions, figures with their source link, the provenance box, the
  "built with" line and the takeaways;
* :mod:`.tables` -- shared tables (cells with pooled secondary rows, contrasts with Holm);
* :mod:`.paper` -- the paper beside this suite (``data/paper_figures.yaml``, the one source);
* figures are :mod:`crossprofile_lib.book.figures`; one task end to end is
  :mod:`crossprofile_lib.book.walkthrough` (``book.walkthrough``); intervals are written by
  :mod:`crossprofile_lib.stats.format` (``book.fmt_ci``, ``book.ci_pivot``).
"""

from __future__ import annotations

from crossprofile_lib.book import walkthrough  # noqa: E402,F401  (one task end to end)
from crossprofile_lib.book.chapter import EXTRA_RUNS, Chapter, page_header, setup  # noqa: F401
from crossprofile_lib.book.display import (
    BUILT_WITH,
    MIN_TEMPLATES_FOR_INTERVALS,
    SILENT_CHOICES,
    Captions,
    Notice,
    admonition,
    built_with,
    built_with_text,
    data_source_box,
    details,
    docstring_html,
    near_chance,
    near_chance_name,
    num,
    provenance_box,
    run_notices,
    show_figure,
    takeaways,
)
from crossprofile_lib.book.experiments import DEFAULTS, QUICK, BookRuns, prepare  # noqa: F401
from crossprofile_lib.book.hbruns import GROUP_VOTE, HBRun, hb_as_run, hb_natural_as_run, hiddenbench_run  # noqa: F401
from crossprofile_lib.book.paper import (
    PaperFiguresError,
    PaperItem,
    load_paper_figures,
    paper_text,
    paper_values,
    paper_vs_suite,
    suite_values,
)
from crossprofile_lib.book.runs import (
    FIT_POLICIES,
    FORMATS,
    GROUP_SIZE_POLICIES,
    LABELS_POLICIES,
    LABELS_PROMPT,
    MODEL_POLICIES,
    REFERENCE,
    REFERENCE_POLICIES,
    ROOT,
    SOCIAL_PROOF_POLICIES,
    SWEEP_POLICIES,
    Run,
    bootstrap,
    config_digest,
    ensure_run,
    load_run,
    model_run,
    primary_budget,
    reference_run,
    reference_who,
    resolve,
    slug,
    unit_column,
    with_cells,
)
from crossprofile_lib.book.tables import (
    CELL_LABELS,
    HEATMAP_POLICIES,
    POOLED_LABELS,
    accuracy_matrix,
    at_budget,
    cell_gaps,
    cell_rows,
    contrast_table,
    contrasts_with_holm,
    grid_calls,
    label_effect_rows,
    social_proof_fit,
)
from crossprofile_lib.stats.format import ci_pivot, fmt_ci, fmt_p  # noqa: F401  (the one formatter)
