"""Role-blindness check: can shallow text features tell a fact's role? If they can, much better than the base rate,
a model could read roles from style instead of evidence. Features per fact: length in tokens, digits, any digit,
positive and negative sentiment words (a small lexicon), whether it is about the file's first option, an intercept;
a multinomial logit (statsmodels ``MNLogit``) cross-validated with whole domains held out.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from crossprofile_lib.design import ROLES
from crossprofile_lib.task.templates import Template
from crossprofile_lib.task.tokenizer import default_tokenizer

POSITIVE = frozenset("""passed praised reliable fast quick faster praised won award awarded zero
 strong high improved cut saved reduced free safe secure stable available excellent record clean
 accredited certified approved complete completed ahead early trusted full every""".split())
NEGATIVE = frozenset("""failed failure late delay delayed delays slow complaint complaints broke
 broken missed fine fined lost poor overran over problem problems dispute leak leaked error errors
 crash crashed closed cancelled shortfall unpaid penalty injured warning breach defect defects
 stopped recalled rejected unable""".split())
_WORD = re.compile(r"[A-Za-z]+")


def fact_features(t: Template) -> np.ndarray:
    """Feature matrix of shape ``(12, 7)`` for a template's facts, in file order."""
    tok = default_tokenizer()
    first = t.options[0].id
    rows = []
    for f in t.facts:
        words = [w.lower() for w in _WORD.findall(f.text)]
        digits = sum(c.isdigit() for c in f.text)
        rows.append([tok.count(f.text), digits, float(digits > 0), sum(w in POSITIVE for w in words),
                     sum(w in NEGATIVE for w in words), float(f.about == first), 1.0])
    return np.asarray(rows, dtype=float)


@dataclass(frozen=True)
class RoleBlindness:
    accuracy: float        # held-out accuracy of the classifier
    base_rate: float       # accuracy of always predicting the most frequent role
    n_facts: int
    n_folds: int
    per_role_recall: dict

    @property
    def excess(self) -> float:
        return self.accuracy - self.base_rate


def role_blindness(templates: Sequence[Template], n_folds: int = 6) -> RoleBlindness:
    """Domain-held-out accuracy of a multinomial logit predicting roles from text features."""
    import statsmodels.api as sm  # lazy: statsmodels costs seconds to import; only this check needs it
    X = np.vstack([fact_features(t) for t in templates])
    y = np.concatenate([[ROLES.index(f.role) for f in t.facts] for t in templates])
    domains = sorted({t.domain for t in templates})
    dom = np.concatenate([[domains.index(t.domain)] * len(t.facts) for t in templates])
    folds = np.arange(len(domains)) % n_folds
    pred = np.empty_like(y)
    # standardise the non-constant columns on the training folds only
    for k in range(n_folds):
        test = np.isin(dom, np.flatnonzero(folds == k))
        if not test.any():
            continue
        mu, sd = X[~test, :-1].mean(0), X[~test, :-1].std(0) + 1e-9
        Z = np.column_stack([(X[:, :-1] - mu) / sd, X[:, -1]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = sm.MNLogit(y[~test], Z[~test]).fit(disp=0, maxiter=200, method="bfgs")
        pred[test] = np.asarray(fit.predict(Z[test])).argmax(1)
    counts = np.bincount(y, minlength=3)
    recall = {r: float((pred[y == i] == i).mean()) for i, r in enumerate(ROLES)}
    return RoleBlindness(float((pred == y).mean()), float(counts.max() / len(y)), len(y),
                         int(min(n_folds, len(domains))), recall)
