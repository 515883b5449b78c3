"""The book's library: everything a chapter notebook (``notebooks/*.md``) calls, in one namespace.

A chapter imports only ``from crossprofile_lib import book`` (and, for its figures, ``from crossprofile_lib.book
import figures``); its ``parameters`` cell names fields of :class:`~.params.BookParams`, each ``= None`` (the book's
default), and ``book.setup`` resolves them. :data:`_NAMESPACE` says which module defines each name: the plumbing
(:mod:`.params`, :mod:`.runs`, :mod:`.hbruns`, :mod:`.experiments`, :mod:`.chapter`, :mod:`.display`, :mod:`.tables`,
:mod:`.paper`, :mod:`.figures`, :mod:`.explorer`, :mod:`.build`) and
one module per chapter's findings."""

from __future__ import annotations

from importlib import import_module

from crossprofile_lib.design import CLASSIC, MIRROR, PRIMARY_BUDGET
from crossprofile_lib.stats.format import ci_pivot

#: Every name a chapter calls, by the module that defines it (imported here, eagerly, into ``book``).
_NAMESPACE = {
    "chapter": "built_with built_with_text provenance_box run_notices setup takeaways",
    "display": "HTML SILENT_CHOICES Captions Markdown admonition data_source_box details display docstring_html esc num "
               "one_decimal show_figure NEAR_CHANCE_FLAG name_html near_chance uninformative_cell MARKS mark mark_text "
               "run_mark",
    "explain": "mechanism reference_why_table why why_table",
    "experiments": "BookRuns",
    "explorer": "concept_takeaways controls exercises explore find_template live_exercises live_explorer policy_choices "
                "templates_by_id variant_walkthroughs walkthrough",
    "hbruns": "HBRun hb_as_run hb_natural_as_run",
    "headline": "COPY CORE rarest_takeaways central_cells central_contrast exact_composition first_finding "
                "headline_items headline_takeaways marked_kept random_line "
                "paper_beside_run thresholds_note FIXED_K ORACLE_NOTE REL REL_AND_BAL accuracy_by_variant by_decider "
                "classic_composition composition_paper_text fixed_k noisy_filter_grid noisy_filter_table "
                "noisy_filter_takeaways relevance_filter_table relevance_takeaways",
    "methods": "cost_takeaways grid_costs measured_note budget_sizes budget_takeaways classic_side_composition "
               "decision_prompt_html default_tokenizer label_costs paper_cell_values prereg_table catalogue "
               "catalogue_takeaways count domain_table first_per_domain per_role_recall rejections role_blindness "
               "role_blindness_note role_blindness_table template_html templates_in validator_margins",
    "models": "status_line",
    "compare": "comparison_page_runs coverage_note finding_why findings net_lead_message net_lead_tables summary",
    "hbtables": "hb_missing hb_status hb_takeaways headroom_warning kept_table model_controlled_table "
                "natural_paper_table natural_table one_session r1_b3_table",
    "paper": "LONG_TABLE_STYLES PaperFiguresError chapter_links comparison_runs left_out_line load_paper_figures "
             "long_comparison long_takeaways main_rows model_summary paper_text paper_vs_suite reference_rows",
    "paperfit": "composition_note contribution_display contribution_table fit_box fit_tokenizer fit_built_with "
                "fit_implications fit_params_table "
                "fit_takeaways fit_to_paper fit_who label_removal_note memory_table outside_table worst_misses",
    "params": "DEFAULTS QUICK BookParams BookParamsError",
    "repairs": "accuracy_by_cell composition_by_variant failure_summary failures_by_net_lead no_policy_note policies_in "
               "policy_files_note recorded_policy_files user_policies_shown GROUP_POLICIES POL count_free_versus "
               "format_by_cell format_rows gaps_by_run "
               "group_size_cell group_size_composition group_size_rows group_size_runs labels_prompt_pairs "
               "labels_prompt_table no_labels_prompt_note repair_takeaways with_mine",
    "runs": "LABELS_PROMPT Run bootstrap config_digest primary_budget reference_run reference_who resolve "
            "with_cells",
    "socialproof": "LABEL_ITEMS SHARED_ITEM deciders label_controls label_effects_by_run label_gap label_takeaways "
                   "missing_shared same_model_paper_column support_shared_by_run support_shared_wide sweep_runs "
                   "sweep_table sweep_who verdict_word by_net_lead_table net_lead_analyses net_lead_takeaways "
                   "paper_by_lead regression_outputs social_proof_fits ties_note where_text",
    "figures": "Signal no_signal_note",
    "tables": "KEPT accuracy_matrix at_budget cell_rows cells_by_run contrast_table contrasts_with_holm holm_by_run "
              "label_effect_rows net_lead_where not_estimable_reason paper_by_title select",
}
for _module, _names in _NAMESPACE.items():
    _m = import_module(f"{__name__}.{_module}")
    globals().update({_n: getattr(_m, _n) for _n in _names.split()})
