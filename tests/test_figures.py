"""The book's figures: sized for the text column at full size, legends outside the axes, a message
title computed from the data, one colour per policy, SVG output, and the model-panel signal rule."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from crossprofile_lib.book import figures as F  # noqa: E402

RNG = np.random.default_rng(0)


def _bars():
    t = pd.DataFrame([(c, p, e, e - 8, e + 8) for c in ("classic", "mirror")
                      for p, e in zip(("R1", "B4", "Random"), (35.0, 71.0, 52.0))],
                     columns=["cell", "policy", "estimate", "lo", "hi"])
    return t, F.interval_bars(t, "cell", "policy", [], title="what is plotted")


def _boxes(fig):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return r, [ax.get_window_extent(r) for ax in fig.axes if ax.get_visible() and ax.has_data()]


def test_legend_sits_outside_every_axes():
    _, fig = _bars()
    r, axes = _boxes(fig)
    assert fig.legends, "the legend is a figure legend"
    lb = fig.legends[0].get_window_extent(r)
    assert not any(lb.overlaps(a) for a in axes), "the legend overlaps the data"
    assert all(ax.get_legend() is None for ax in fig.axes)


def test_message_title_is_computed_from_the_data():
    t, fig = _bars()
    texts = [x.get_text() for x in fig.texts]
    top = t.loc[t.groupby("cell")["estimate"].idxmax(), "policy"]
    msg = texts[0]
    assert all(f"{p} leads" in msg for p in top), msg
    assert "what is plotted" in texts, "the chapter's title becomes the subtitle"
    assert F.interval_bars(t, "cell", "policy", [], message="given").texts[0].get_text() == "given"


def test_fonts_readable_and_width_fits_the_column():
    _, fig = _bars()
    assert fig.get_size_inches()[0] <= F.WIDTH
    sizes = [t.get_fontsize() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()]
    sizes += [t.get_fontsize() for t in fig.texts if t.get_text()]
    assert min(sizes) >= 8, sizes


def test_one_colour_per_policy_everywhere():
    t, fig = _bars()
    bars = {b.get_label(): matplotlib.colors.to_hex(b.patches[0].get_facecolor())
            for b in fig.axes[0].containers if hasattr(b, "patches")}
    assert bars["R1"] == F.policy_color("R1") and bars["B4"] == F.policy_color("B4")
    assert F.policy_color("R1:unlabeled") != F.policy_color("R1")
    assert len({F.policy_color(p) for p in F.BASE_COLORS}) == len(F.BASE_COLORS)


def test_svg_output_is_deterministic():
    outs = []
    for _ in range(2):
        _, fig = _bars()
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        outs.append(buf.getvalue())
    assert outs[0] == outs[1] and outs[0].startswith(b"<?xml")


def test_paper_vs_run_labels_paper_values_and_counts_agreement():
    t = pd.DataFrame([("R1", "%", 90, 85, 95, "Qwen", 88.0), ("B4", "%", 40, 30, 50, "Qwen", 60.0),
                      ("R1 - B4", "points", 50, 40, 60, "Qwen", 43.0)],
                     columns=["quantity", "unit", "estimate", "lo", "hi", "paper_model", "paper"])
    fig = F.paper_vs_run(t, [])
    assert fig.texts[0].get_text() == "2 of 3 paper values fall inside this run's 95% interval"
    labels = fig.legends[0].get_texts()
    assert "paper: Qwen" in [x.get_text() for x in labels]


class _Run:
    def __init__(self, df, reference=False):
        self.df, self.is_reference, self.label, self.boot = df, reference, "m (score mode)", None


def test_model_signal_hides_a_chance_level_panel_and_says_why():
    n = 300
    chance = pd.DataFrame({"policy": "R1", "template_id": "t", "correct": RNG.random(n) < 1 / 3})
    good = chance.assign(correct=RNG.random(n) < 0.8)
    s = F.model_signal(_Run(chance))
    assert not s.ok and "not above chance" in s.reason and "m (score mode)" in s.reason
    assert F.model_signal(_Run(good)).ok
    assert F.model_signal(_Run(chance, reference=True)).ok
    assert "not drawn" in F.no_signal_note(s).data


def test_model_signal_uses_the_headroom_check_when_all_and_empty_ran():
    from crossprofile_lib.stats.bootstrap import TemplateBootstrap
    tids = [f"t{i}" for i in range(12)]
    rows = [(p, t, c) for t in tids for p, c in (("ALL", True), ("EMPTY", False))] * 3
    df = pd.DataFrame(rows, columns=["policy", "template_id", "correct"])
    boot = TemplateBootstrap.draw(np.array(tids), 200, np.random.default_rng(0))
    assert F.model_signal(_Run(df), boot).ok
    flat = df.assign(correct=True)
    s = F.model_signal(_Run(flat), boot)
    assert not s.ok and "headroom" in s.reason


@pytest.mark.parametrize("n", [1, 8])
def test_concept_figure_message_counts_kept_decoys(n):
    from crossprofile_lib.book import explorer as W
    from crossprofile_lib.task.templates import load_templates
    from crossprofile_lib.task.variants import VARIANT_NAMES
    tpl = load_templates(["templates/dev"])[0]
    views = [W.walkthrough(tpl, v, policies=("R1",)) for v in VARIANT_NAMES[:n]]
    fig = F.concept_figure(views, "sub")
    kept = [v.composition("R1").kept_decoy for v in views]
    assert f"{min(kept)}" in fig.texts[0].get_text() and fig.get_size_inches()[0] <= F.WIDTH


def test_a_shared_top_is_named_as_a_tie():
    assert F.top(pd.Series({"R1": 100.0, "B4": 20.0, "ALL": 100.0})) == "R1 and ALL tie to lead"
    assert F.top(pd.Series({"R1": 90.0, "B4": 20.0})) == "R1 leads"
    assert F.top(pd.Series({p: 100.0 for p in "abcde"})) == "5 tie to lead"
    acc = pd.DataFrame({"PSP": [100.0, 100.0, 20.0], "SPS": [20.0, 100.0, 30.0]}, index=["R1", "ALL", "M1"])
    msg = F.accuracy_heatmap(acc, []).texts[0].get_text().replace("\n", " ")
    assert msg == "R1 and ALL tie to lead the classic cell PSP (100%); ALL leads the mirror cell SPS (100%)", msg


def test_the_heatmap_title_states_the_cells_finding():
    """With R1 and B4 in the map the title is the chapter's finding (R1 against B4 in both cells), not
    a count of policies tied at 100%."""
    acc = pd.DataFrame({"PSP": [100.0, 100.0, 20.0], "SPS": [20.0, 100.0, 90.0]}, index=["R1", "ALL", "B4"])
    msg = F.accuracy_heatmap(acc, []).texts[0].get_text().replace("\n", " ")
    assert msg == "Classic cell PSP: R1 100% vs B4 20%; mirror cell SPS: R1 20% vs B4 90%", msg


def test_nothing_is_drawn_outside_the_figure():
    """Long titles, many legend entries and several runs are wrapped to the width: the tight bounding box
    (what Jupyter saves) stays the figure's own size, so the book shows the figure at full size."""
    pols = ["R1", "B4", "Random", "M1", "R1-rel", "R1-rel-oracle", "BAL", "BAL-oracle", "ALL", "EMPTY",
            "R1:unlabeled", "B4:shuffled", "private-only", "shared-only"]
    t = pd.DataFrame([(v, p, 50.0, 40.0, 60.0) for v in ("PSP", "PSS", "SPP", "SPS") for p in pols],
                     columns=["variant", "policy", "estimate", "lo", "hi"])
    long = "a long subtitle naming the budget, the templates, the seeds and the run " * 3
    fig = F.interval_bars(t, "variant", "policy", ["reference decider (ledger, social proof 0.5) - model x"] * 4,
                          title=long, message="a message that goes on " * 6)
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    w, h = fig.get_size_inches()
    assert box.x1 <= w + 0.05 and box.x0 >= -0.05 and box.y1 <= h + 0.05 and box.y0 >= -0.05, (box, w, h)
    r = fig.canvas.get_renderer()
    texts = [x.get_window_extent(r) for x in fig.texts] + [fig.legends[0].get_window_extent(r)]
    axes = [a.get_window_extent(r) for a in fig.axes]
    assert not any(tb.overlaps(ab) for tb in texts for ab in axes), "a title, subtitle or legend overlaps the plot"


def test_many_groups_are_summarised_not_enumerated():
    t = pd.DataFrame([(v, p, e, e - 5, e + 5) for v in ("PPP", "PSP", "SPS", "SSS")
                      for p, e in (("R1", 90.0), ("B4", 90.0 if v == "PSP" else 20.0), ("Random", 50.0))],
                     columns=["variant", "policy", "estimate", "lo", "hi"])
    msg = F.interval_bars(t, "variant", "policy", []).texts[0].get_text().replace("\n", " ")
    assert msg == "R1 is highest (or tied) in every variant", msg
    c = pd.DataFrame(dict(policy=["R1", "B4", "R1-rel"], kept_support=[5.0, 3, 5], kept_decoy=[0.0, 3, 3],
                          kept_irrelevant=[4.0, 2, 0]))
    assert F.composition_bars(c, []).texts[0].get_text() == "B4 and R1-rel keep the most decoys (3.00 of 3)"


def test_coincident_series_stay_visible_and_say_so():
    """Two policies at the same values (R1 and BAL under R1-rel at 100%): each drawn with its own marker,
    the later one dashed and offset, its legend entry naming the series it lies on."""
    t = pd.DataFrame({"agents": [3, 4, 3, 4, 3, 4], "policy": ["R1-rel"] * 2 + ["R1"] * 2 + ["B4"] * 2,
                      "estimate": [100.0, 100.0, 100.0, 100.0, 40.0, 50.0]})
    fig = F.line_by(t, "agents", "policy", [], "accuracy (%)")
    labels = [tx.get_text() for leg in fig.legends for tx in leg.get_texts()]
    assert "R1 (same as R1-rel)" in labels and "R1-rel" in labels and "B4" in labels
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert lines["R1 (same as R1-rel)"].get_linestyle() == "--" and lines["R1-rel"].get_linestyle() == "-"
    assert lines["R1 (same as R1-rel)"].get_marker() != lines["R1-rel"].get_marker()
    assert not np.allclose(lines["R1 (same as R1-rel)"].get_xdata(), lines["R1-rel"].get_xdata())


def test_the_all_memory_formats_are_not_three_greys():
    import colorsys

    import matplotlib.colors as mc
    cols = [F.policy_color(p) for p in ("ALL", "ALL:unlabeled", "ALL:shuffled")]
    assert len(set(cols)) == 3
    sats = [colorsys.rgb_to_hls(*mc.to_rgb(c))[2] for c in cols[1:]]
    assert min(sats) > 0.3, cols          # coloured, not grey
