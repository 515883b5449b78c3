""":class:`BookRuns`: every run of one :class:`~crossprofile_lib.book.params.BookParams`, made or found once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from crossprofile_lib.book.hbruns import HBRun, hiddenbench_run
from crossprofile_lib.book.models import ModelSpec, import_run, parse_specs, unique_labels
from crossprofile_lib.book.params import BookParams
from crossprofile_lib.book.runs import LABELS_PROMPT, Run, config_digest, model_run, reference_run, slug
from crossprofile_lib.book.schedule import run_steps
from crossprofile_lib.design import (
    FIT_POLICIES,
    FIXED_K_DEFAULT,
    GROUP_SIZE_POLICIES,
    HB_POLICIES,
    LABEL_FORMATS,
    LABELS_POLICIES,
    MODEL_POLICIES,
    PRIMARY_BUDGET,
    REFERENCE_POLICIES,
    SOCIAL_PROOF_POLICIES,
    SWEEP_POLICIES,
)
from crossprofile_lib.policies import REGISTRY


def user_copy(names) -> list[str]:
    """The copy policies among ``names`` (those with fixed-k and provenance-format controls)."""
    return [n for n in names if REGISTRY[n].kind == "copy"]


#: The formats a copy policy of your own gets in the social-proof grid (not ``claim-id``: its lines can cost more
#: tokens than the budget was packed with, which policies/checks.py refuses).
USER_FORMATS = tuple(f for f in LABEL_FORMATS if f != "claim-id")


def user_formats(names) -> list[str]:
    """The social-proof grid's specs of your policies: a copy policy in each format of :data:`USER_FORMATS`."""
    copy = set(user_copy(names))
    return [n if f == "full" else f"{n}:{f}" for n in names for f in (USER_FORMATS if n in copy else ("full",))]


def user_grid(names) -> list[str]:
    """The reference grid's specs of your policies: each, and for a copy policy its ``-k7`` and ``:unlabeled`` controls."""
    copy = set(user_copy(names))
    return [s for n in names for s in ([n, f"{n}-k{FIXED_K_DEFAULT}", f"{n}:unlabeled"] if n in copy else [n])]


@dataclass
class BookRuns:
    """Every experiment the chapters read, for one parameter set (a :class:`BookParams` or a dict of overrides);
    a run that cannot be made here is ``None`` and :attr:`skipped` says why (key: backend or ``hiddenbench:<backend>``)."""

    params: BookParams | dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    _made: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if not isinstance(self.params, BookParams):
            self.params = BookParams.resolve(self.params)

    def _once(self, name: str, make: Callable):
        if name not in self._made:
            self._made[name] = make()
        return self._made[name]

    def specs(self) -> list[ModelSpec]:
        """Every language model: BACKEND first (the *primary* model), then BACKENDS, none twice."""
        p = self.params
        out = ([ModelSpec(p.backend)] if p.backend else []) + parse_specs(p.backends)
        return list({sp.text: sp for sp in out}.values())  # equal texts are equal specs

    @property
    def backend(self) -> str:
        """The primary model's backend ('' when the book runs no language model)."""
        specs = self.specs()
        return specs[0].backend if specs else ""

    @property
    def primary_budget(self) -> str:
        """prereg.yaml's primary budget when the parameters' budgets have it, else their first ratio."""
        have = self.params.budgets
        b = [x for x in have if not str(x).endswith("t")] or list(have)
        return PRIMARY_BUDGET if PRIMARY_BUDGET in have or not b else b[0]

    def reference(self, social_proof: float = 0.0, n_agents: int = 4) -> Run:
        """The reference decider's grid (``social_proof`` > 0: the social-proof run; ``n_agents``: a group-size
        run); your policies join each (:func:`user_grid`, :func:`user_formats`)."""
        p = self.params
        u, policies = p.user_policies, None
        if u:
            policies = ([*SOCIAL_PROOF_POLICIES, *user_formats(u)] if social_proof else
                        [*GROUP_SIZE_POLICIES, *u] if n_agents != 4 else [*REFERENCE_POLICIES, *user_grid(u)])
        return self._once(f"ledger-sp{social_proof:g}-n{n_agents}", lambda: reference_run(
            p.runs_root, p.templates, p.seeds, p.budgets, social_proof=social_proof, n_agents=n_agents,
            variants=p.variants, tokenizer=p.tokenizer, policies=policies))

    def social_proof(self) -> Run:
        return self.reference(social_proof=self.params.social_proof)

    def sweep(self, s: float) -> Run:
        """The ALL memory in every format, social-proof weight ``s`` (``runs/ledger-sp<s>-all``; chapter 6)."""
        p = self.params
        return self._once(f"sweep-{s:g}", lambda: reference_run(
            p.runs_root, p.templates, p.seeds, [self.primary_budget], social_proof=s,
            policies=SWEEP_POLICIES, name=f"ledger-sp{s:g}-all", variants=p.variants, tokenizer=p.tokenizer))

    def fit_check(self) -> Run:
        """A softmax reference decider the social-proof fit must recover (``runs/ledger-sp<s>-beta<b>``)."""
        p = self.params
        return self._once("fit-check", lambda: reference_run(
            p.runs_root, p.templates, p.seeds, p.budgets, social_proof=p.social_proof,
            policies=FIT_POLICIES, inverse_temperature=p.stochastic_beta, variants=p.variants,
            tokenizer=p.tokenizer))

    def model(self) -> Optional[Run]:
        """The primary language model's sample (None without a model backend or when it cannot run here)."""
        specs = self.specs()
        return self.model_for(specs[0]) if specs else None

    def model_for(self, spec: ModelSpec) -> Optional[Run]:
        """One model spec's sample (its own templates/seeds/budgets/variants where the spec gives them)."""
        p, s = self.params, spec.sample(self.params)
        return self._once(f"model:{spec.text}", lambda: model_run(
            p.runs_root, spec.backend, s["model_templates"], s["model_seeds"], s["model_budgets"],
            s["model_variants"], backend_options=dict(spec.backend_options), skipped=self.skipped,
            **({"policies": [*MODEL_POLICIES, *user_grid(p.user_policies)]} if p.user_policies else {})))

    def imported(self) -> list:
        """The run folders of RUNS, read in place (a folder that cannot be imported raises ``RunImportError``)."""
        return self._once("imported", lambda: [import_run(r) for r in self.params.runs])

    def models(self) -> list[Run]:
        """Every model's CrossProfile run: each spec's, then the imported ones; labels made unique."""
        def make():
            made = [self.model_for(sp) for sp in self.specs()]
            runs = [r for r in made if r is not None] + [r for r in self.imported() if isinstance(r, Run)]
            return unique_labels(runs)
        return self._once("models", make)

    def labels_prompt_for(self, spec: ModelSpec) -> Optional[Run]:
        """One spec's ALL memories with the 'labels are not evidence' prompt (chapter 12;
        ``runs/<backend>-labels-not-evidence``); an imported run has none (it would need model calls)."""
        p, s = self.params, spec.sample(self.params)
        primary = self.specs()[0].text == spec.text
        return self._once("labels" if primary else f"labels:{spec.text}", lambda: model_run(
            p.runs_root, spec.backend, s["model_templates"], s["model_seeds"], s["model_budgets"],
            s["model_variants"], policies=LABELS_POLICIES,
            backend_options={**dict(spec.backend_options), "decision_prompt": LABELS_PROMPT},
            suffix=LABELS_PROMPT if primary else f"{LABELS_PROMPT}@{config_digest(spec.text)}",
            skipped=self.skipped))

    def hiddenbench(self) -> Optional[HBRun]:
        """HiddenBench: the reference decider's controlled run (a model's: :meth:`hiddenbench_for`)."""
        p = self.params
        return self._once("hb-ledger", lambda: hiddenbench_run(
            p.runs_root, "ledger", p.hiddenbench_path, ["controlled"], p.hb_seeds,
            budgets=p.hb_budgets, skipped=self.skipped, policies=self.hb_policies()))

    def hiddenbench_for(self, backend: str) -> Optional[HBRun]:
        """One model backend's HiddenBench protocols (``runs/hiddenbench-<backend>``)."""
        p, opts = self.params, dict(next((sp.backend_options for sp in self.specs() if sp.backend == backend), ()))
        return self._once(f"hb-model:{backend}", lambda: hiddenbench_run(
            p.runs_root, backend, p.hiddenbench_path, p.hb_model_protocols, p.hb_model_seeds,
            p.hb_ablations, p.hb_model_limit or None, budgets=p.hb_budgets, skipped=self.skipped,
            backend_options=opts, policies=self.hb_policies()))

    def hb_policies(self) -> Optional[list[str]]:
        """HiddenBench's policies: None (built-in grid) or the built-in grid plus your own (:func:`user_grid`)."""
        u = self.params.user_policies
        return [*HB_POLICIES, *user_grid(u)] if u else None

    def hb_models(self) -> list[HBRun]:
        """Every model's HiddenBench run: each spec's backend (once per backend), then the imported ones."""
        backends = list(dict.fromkeys(sp.backend for sp in self.specs()))
        made = [self.hiddenbench_for(b) for b in backends]
        return [h for h in made if h is not None] + [h for h in self.imported() if isinstance(h, HBRun)]

    def steps(self) -> list[tuple[str, Callable, str]]:
        """(folder name, make, key into :attr:`skipped`) for every run, in build order."""
        p = self.params
        out = [("ledger", self.reference, "ledger"),
               (f"ledger-sp{p.social_proof:g}", self.social_proof, "ledger")]
        out += [(f"ledger-sp{s:g}-all", lambda s=s: self.sweep(s), "ledger") for s in p.social_proof_sweep]
        out += [(f"ledger-agents{n}", lambda n=n: self.reference(n_agents=n), "ledger")
                for n in p.group_sizes if n != 4]
        out.append((f"ledger-sp{p.social_proof:g}-beta{p.stochastic_beta:g}", self.fit_check, "ledger"))
        out.append(("hiddenbench-ledger", self.hiddenbench, "hiddenbench:ledger"))
        names = {name for name, _, _ in out}
        for i, sp in enumerate(self.specs()):  # each model (the primary first): its sample and its HiddenBench run
            name = slug(sp.backend) + (f"@{config_digest(sp.text)}" if i and sp.text != sp.backend else "")
            if name not in names:
                out += [(name, lambda sp=sp: self.model_for(sp), sp.backend),
                        (f"{name}-{LABELS_PROMPT}", lambda sp=sp: self.labels_prompt_for(sp), sp.backend)]
                names.add(name)
            hb = f"hiddenbench-{slug(sp.backend)}"
            if hb not in names:
                out.append((hb, lambda b=sp.backend: self.hiddenbench_for(b), f"hiddenbench:{sp.backend}"))
                names.add(hb)
        return out

    def prepare(self, log=print, workers: int | None = None) -> dict:
        """Run (or find) every experiment; ``{name: run or None}``, on ``workers`` processes (default: the cores),
        the model's runs one after another in one of them (:mod:`.schedule`)."""
        out = run_steps(self, workers, log)
        for r in self.imported():  # read in place: no step, no model call
            out[f"imported {r.path}"] = r
        return out
