"""The one formatter of estimates, intervals and p-values (CLI report and book)."""

import math

import numpy as np
import pandas as pd

from crossprofile_lib.stats.format import ci_column, ci_pivot, fmt_ci, fmt_p


def test_fmt_ci_and_fmt_p():
    assert fmt_ci(12.345, 10.1, 14.61) == "12.3 [10.1, 14.6]"
    assert fmt_ci(0.4961, 0.4869, 0.5063, 3) == "0.496 [0.487, 0.506]"
    assert fmt_ci(1.0, math.nan, None) == "1.0" and fmt_ci(np.float64(2), np.nan, np.nan, 2) == "2.00"
    assert fmt_ci(None, 1, 2) == "n/a" and fmt_ci(float("nan"), 1, 2, missing="–") == "–"
    assert fmt_ci(pd.NA, 1, 2) == "n/a"
    assert fmt_p(0.04567) == "0.0457" and fmt_p(1e-4) == "0.0001" and fmt_p(2e-5) == "<1e-4"
    assert fmt_p(None) == "" and fmt_p(np.nan) == ""


def test_pivot_keeps_first_appearance_order_and_blanks():
    t = pd.DataFrame(dict(policy=["R1", "R1", "B4"], cell=["mirror", "classic", "mirror"],
                          estimate=[1.0, 2.0, np.nan], lo=[0.5, 1.5, np.nan], hi=[1.5, 2.5, np.nan]))
    assert ci_column(t).tolist() == ["1.0 [0.5, 1.5]", "2.0 [1.5, 2.5]", "n/a"]
    p = ci_pivot(t, "policy", "cell")
    assert list(p.index) == ["R1", "B4"] and list(p.columns) == ["mirror", "classic"]
    assert p.loc["B4", "classic"] == "" and p.loc["B4", "mirror"] == "n/a"
    p2 = ci_pivot(t.assign(b="0.6"), ["policy", "b"], "cell")
    assert p2.index.names == ["policy", "b"] and p2.loc[("R1", "0.6"), "classic"] == "2.0 [1.5, 2.5]"
    assert ci_pivot(t.iloc[:0], "policy", "cell").empty
