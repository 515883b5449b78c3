"""The book's library: everything a chapter notebook (``notebooks/*.md``) calls, in one namespace.

A chapter imports only ``from crossprofile_lib import book`` (and, for its figures,
``from crossprofile_lib.book import figures``); its ``parameters`` cell names fields of
:class:`~.params.BookParams`, each ``= None`` (the book's default), and ``book.setup`` resolves them.

The plumbing:

* :mod:`.params` -- the book's parameters, ONE pydantic model (:class:`BookParams`; :data:`DEFAULTS`,
  :data:`QUICK` are its plain-dict views) read by the build, papermill and :func:`setup`;
* :mod:`.runs` -- run folders (:class:`Run`), made or found by configuration, never overwritten by
  another configuration; :mod:`.hbruns` -- HiddenBench run folders;
* :mod:`.experiments` -- every run of one parameter set (:class:`BookRuns`, with the reasons a run is
  missing); :mod:`.chapter` -- ONE chapter preamble, :func:`setup`;
* :mod:`.display` -- boxes, captions (every figure labelled for ``{numref}``), figures with their source
  link; IPython's ``display``; :mod:`.provenance` -- the notices, the provenance box, the "built with"
  line and the takeaways; :mod:`.flags` -- the near-chance flag and the intervals that say nothing;
* :mod:`.tables` -- shared tables (cells with pooled secondary rows, THE estimate of a policy in a
  cell, contrasts with Holm); :mod:`.paper` -- the paper beside this suite (``data/paper_figures.yaml``);
* :mod:`.figures` / :mod:`.style` -- the figures; :mod:`.explorer` -- one task end to end (the
  walkthrough, the classroom explorer); :mod:`.build` -- the build (``crossprofile book``);
  :mod:`.sphinx_figures`, :mod:`.sphinx_offline`, :mod:`.sphinx_cite` -- the book's Sphinx extensions.

What each chapter computes, in a module named after it: :mod:`.headline` (landing page),
:mod:`.catalogue` (2), :mod:`.methods` (3), :mod:`.rarest` (4), :mod:`.relevance` (5),
:mod:`.socialproof` (6), :mod:`.netlead` (7), :mod:`.hbtables` (8), :mod:`.costs` (9), :mod:`.repairs`
(12), :mod:`.paperfit_tables` (13). Intervals are written by :mod:`crossprofile_lib.stats.format`
(``book.fmt_ci``, ``book.ci_pivot``).
"""

from __future__ import annotations

from crossprofile_lib.book.catalogue import (
    RoleBlindness,
    catalogue,
    catalogue_takeaways,
    count,
    domain_table,
    first_per_domain,
    per_role_recall,
    rejections,
    role_blindness,
    role_blindness_note,
    role_blindness_table,
    template_html,
    templates_in,
    validator_margins,
)
from crossprofile_lib.book.chapter import EXTRA_RUNS, Chapter, setup
from crossprofile_lib.book.compare import (
    FINDINGS,
    Finding,
    comparison_page_runs,
    coverage_note,
    finding_table,
    findings,
    net_lead_message,
    net_lead_tables,
    summary,
)
from crossprofile_lib.book.costs import cost_takeaways, grid_costs, measured_note
from crossprofile_lib.book.display import (
    HTML,
    MIN_TEMPLATES_FOR_INTERVALS,
    SILENT_CHOICES,
    Captions,
    Markdown,
    admonition,
    data_source_box,
    details,
    display,
    docstring_html,
    esc,
    num,
    one_decimal,
    show_figure,
)
from crossprofile_lib.book.experiments import BookRuns, prepare
from crossprofile_lib.book.explorer import (
    Exploration,
    Verdict,
    Walkthrough,
    concept_takeaways,
    controls,
    exercises,
    explore,
    find_template,
    kept_counts,
    outcome,
    policy_choices,
    static_note,
    templates_by_id,
    variant_views,
    variant_walkthroughs,
    verdict,
    walkthrough,
)
from crossprofile_lib.book.flags import (
    NEAR_CHANCE_FLAG,
    name_html,
    name_text,
    near_chance,
    near_chance_name,
    uninformative,
    uninformative_cell,
)
from crossprofile_lib.book.hbruns import GROUP_VOTE, HBRun, hb_as_run, hb_natural_as_run, hiddenbench_run
from crossprofile_lib.book.hbtables import (
    hb_missing,
    hb_model_runs,
    hb_status,
    hb_takeaways,
    headroom_warning,
    kept_table,
    model_controlled_table,
    natural_paper_table,
    natural_table,
    one_session,
    r1_b3_table,
)
from crossprofile_lib.book.headline import (
    HEADLINE,
    central_cells,
    central_contrast,
    headline_items,
    headline_takeaways,
    paper_beside_run,
    thresholds_note,
)
from crossprofile_lib.book.methods import (
    budget_sizes,
    budget_takeaways,
    classic_side_composition,
    decision_prompt_html,
    default_tokenizer,
    label_costs,
    of_180,
    paper_cell_values,
    prereg_table,
)
from crossprofile_lib.book.models import (
    ModelSpec,
    ModelSpecError,
    RunImportError,
    gaps,
    headroom_verdict,
    import_run,
    paper_model_for,
    run_paper_model,
    split_backends,
    status_line,
)
from crossprofile_lib.book.netlead import (
    by_net_lead_table,
    net_lead_analyses,
    net_lead_takeaways,
    net_lead_where,
    paper_by_lead,
    regression_outputs,
    social_proof_fits,
    ties_note,
    where_text,
)
from crossprofile_lib.book.paper import (
    CHAPTER_PAGES,
    LONG_TABLE_STYLES,
    UNINFORMATIVE_WIDTH,
    PaperFiguresError,
    PaperItem,
    agreement_takeaways,
    by_chapter,
    chapter_link,
    chapter_links,
    comparison,
    comparison_runs,
    left_out_line,
    load_paper_figures,
    long_by_chapter,
    long_comparison,
    long_takeaways,
    main_rows,
    model_summary,
    paper_text,
    paper_values,
    paper_vs_suite,
    reference_rows,
    reproduced,
    share_within,
    suite_values,
)
from crossprofile_lib.book.paperfit_tables import (
    composition_note,
    contribution_table,
    fit_box,
    fit_built_with,
    fit_implications,
    fit_params_table,
    fit_takeaways,
    fit_to_paper,
    fit_who,
    label_removal_note,
    memory_table,
    outside_table,
    worst_misses,
)
from crossprofile_lib.book.params import DEFAULTS, QUICK, BookParams, BookParamsError
from crossprofile_lib.book.provenance import (
    BUILT_WITH,
    Notice,
    built_with,
    built_with_text,
    provenance_box,
    run_notices,
    takeaways,
)
from crossprofile_lib.book.rarest import COPY, CORE, rarest_takeaways
from crossprofile_lib.book.relevance import (
    FIXED_K,
    ORACLE_NOTE,
    REL,
    REL_AND_BAL,
    accuracy_by_variant,
    by_decider,
    classic_composition,
    composition_paper_text,
    fixed_k,
    noisy_filter_grid,
    noisy_filter_table,
    noisy_filter_takeaways,
    relevance_filter_table,
    relevance_takeaways,
)
from crossprofile_lib.book.repairs import (
    GROUP_POLICIES,
    POL,
    count_free_versus,
    format_by_cell,
    format_rows,
    gaps_by_run,
    group_size_cell,
    group_size_composition,
    group_size_rows,
    group_size_runs,
    labels_prompt_pairs,
    labels_prompt_table,
    no_labels_prompt_note,
    repair_takeaways,
    with_mine,
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
from crossprofile_lib.book.socialproof import (
    LABEL_ITEMS,
    SHARED_ITEM,
    deciders,
    label_controls,
    label_effects_by_run,
    label_gap,
    label_takeaways,
    missing_shared,
    same_model_paper_column,
    support_shared_by_run,
    support_shared_table,
    support_shared_wide,
    sweep_runs,
    sweep_table,
    sweep_who,
    verdict_word,
    versus_policies,
)
from crossprofile_lib.book.style import Signal, model_signal, no_signal_note
from crossprofile_lib.book.tables import (
    CELL_LABELS,
    HEATMAP_POLICIES,
    KEPT,
    POOLED_LABELS,
    accuracy_matrix,
    at_budget,
    cell_entry,
    cell_gaps,
    cell_rows,
    cell_value,
    cells_by_run,
    contrast_row,
    contrast_table,
    contrasts_with_holm,
    grid_calls,
    holm_by_run,
    label_effect_rows,
    not_estimable_reason,
    paper_by_title,
    select,
    social_proof_fit,
)
from crossprofile_lib.book.yourpolicy import (
    accuracy_by_cell,
    composition_by_variant,
    failure_summary,
    failures_by_net_lead,
    no_policy_note,
    policies_in,
    policy_files_note,
)
from crossprofile_lib.design import CLASSIC, HEADROOM_MIN_POINTS, MIRROR, PRIMARY_BUDGET
from crossprofile_lib.stats.format import ci_pivot, fmt_ci, fmt_p
