"""The rules a policy of your own must keep and the guard around its code (both described in :mod:`.plugins`):
:func:`check_order` / :func:`check_memory` on what it returns, :class:`Guard` around every call into it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import signal
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from crossprofile_lib.policies.registry import Policy
from crossprofile_lib.task.memory import Memory


class PolicyFileError(ValueError):
    """A policy file (or module, or entry point) breaks a rule; ``str()`` names it and the rule."""

    def __init__(self, source: str, rule: str, message: str):
        self.source, self.rule = str(source), rule
        super().__init__(f"{source}: {rule}: {message}")


@dataclass(frozen=True)
class PolicySource:
    """Where plug-in policies came from: ``origin`` ``file``, ``module`` or ``entry point``."""

    origin: str
    spec: str            # what was given: the path, ``module:object`` or ``dist:entry-point``
    path: str            # the Python file it read (resolved)
    sha256: str          # of that file's bytes
    policies: tuple[str, ...]

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"policies": list(self.policies)}


#: policy name -> its source (plug-ins only)
PLUGINS: dict[str, PolicySource] = {}
#: whether the loader's trial is running (the rule an error names: ``trial`` or ``memory``)
TRIAL = [False]


def check_order(name: str, order, n: int) -> list[int]:
    """A copy policy's order (or packer's kept list): claim indices in ``0..n-1``, none twice."""
    try:
        idx = list(order)
    except TypeError:
        raise ValueError(f"policy '{name}' returned {type(order).__name__}, not a list of claim indices") from None
    out = []
    for i in idx:
        if isinstance(i, bool) or not hasattr(i, "__index__"):  # an int, or an integer type such as numpy's
            raise ValueError(f"policy '{name}' returned {i!r}, not a claim index (an integer 0..{n - 1})")
        i = int(i)
        if not 0 <= i < n:
            raise ValueError(f"policy '{name}' returned claim {i}, which does not exist "
                             f"(the claim list has {n} claims: 0..{n - 1})")
        out.append(i)
    if len(set(out)) < len(out):
        raise ValueError(f"policy '{name}' returned a claim index twice ({out})")
    return out


def check_memory(spec, memory, cl, budget: Optional[int]) -> None:
    """The memory a plug-in policy built keeps claims of ``cl`` only, each once, and a budgeted one stays
    within ``budget`` tokens. Raises :class:`PolicyFileError` naming the policy's file."""
    claims = set(cl.claims)
    try:
        for c in memory.kept:
            if c not in claims:
                raise ValueError(f"policy '{spec.name}' kept a claim that is not in the claim list: {c!r:.120}")
        if len(set(memory.kept)) < len(memory.kept):
            raise ValueError(f"policy '{spec.name}' kept a claim twice")
        if spec.budgeted and budget is not None and memory.tokens > budget:
            raise ValueError(f"policy '{spec.name}' built a memory of {memory.tokens} tokens, over its budget of "
                             f"{budget} tokens")
    except ValueError as e:
        raise refusal(spec, str(e)) from None


def refusal(spec, problem: str) -> PolicyFileError:
    """``problem`` of the plug-in policy ``spec`` as a :class:`PolicyFileError` naming its source; rule ``trial``
    while loading, ``memory`` in a run."""
    src = PLUGINS.get(spec.base)
    return PolicyFileError(src.spec if src else spec.base, "trial" if TRIAL[0] else "memory", problem)


#: Seconds one call into a policy file's code may take (its import, ``order``, ``packer``, ``build``).
DEFAULT_TIMEOUT = 30.0
TIMEOUT_ENV = "CROSSPROFILE_POLICY_TIMEOUT"
#: ``--policy-timeout`` (None: the environment, else the default)
TIMEOUT: list = [None]


def time_limit() -> float:
    """The time limit in seconds (0: none): ``--policy-timeout``, else ``$CROSSPROFILE_POLICY_TIMEOUT``,
    else :data:`DEFAULT_TIMEOUT`. A bad environment value raises ``ValueError`` naming it."""
    if TIMEOUT[0] is not None:
        return float(TIMEOUT[0])
    v = os.environ.get(TIMEOUT_ENV, "").strip()
    if not v:
        return DEFAULT_TIMEOUT
    try:
        t = float(v)
    except ValueError:
        t = math.nan
    if not 0 <= t <= 86_400:  # NaN and inf fail too
        raise ValueError(f"{TIMEOUT_ENV}={v}: must be a number of seconds in [0, 86400] (0: no limit)")
    return t


class _Overtime(BaseException):
    """Raised by the timer inside user code (a BaseException: ``except Exception`` there cannot keep it)."""


@contextmanager
def limited(label: str, what: str):
    """Run the block under the time limit (see the module doc); overtime raises :class:`PolicyFileError`
    (rule ``time``) naming ``label`` and ``what``."""
    seconds = time_limit()
    usable = (seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0)  # never inside another timer
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Overtime()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Overtime:
        raise PolicyFileError(label, "time", f"{what} ran longer than the time limit of {seconds:g} s (an endless "
                              f"loop?) and was stopped; raise the limit with --policy-timeout SECONDS or "
                              f"{TIMEOUT_ENV} (0: none)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _where(exc: BaseException, path: str) -> str:
    """``line N`` of ``path`` where ``exc`` was raised (the innermost frame in that file), or ''."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == Path(path).resolve()]
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f" (line {exc.lineno})"
    return f" (line {frames[-1].lineno})" if frames else ""


class Guard:
    """A policy file's function as the registry calls it: under the time limit, its exceptions refused as
    :class:`PolicyFileError` (rule ``trial``/``memory``), a ``build``'s memory recounted and checked against
    the discussion (see the module doc). Picklable when the function is."""

    def __init__(self, fn, label: str, path: str, policy: str, what: str, kind: str):
        self.fn, self.label, self.path, self.policy, self.what, self.kind = fn, label, path, policy, what, kind
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        what = f"policy '{self.policy}': {self.what}()"
        with limited(self.label, what):
            try:
                out = self.fn(*args, **kwargs)
            except (PolicyFileError, _Overtime):
                raise
            except Exception as e:  # noqa: BLE001  (the user's code)
                raise PolicyFileError(self.label, "trial" if TRIAL[0] else "memory",
                                      f"{what} raised {type(e).__name__}: {e}{_where(e, self.path)}") from None
        if self.what == "build":
            self._check_built(args[0] if args else kwargs.get("spec"), args[1] if len(args) > 1 else
                              kwargs.get("inputs"), out)
        return out

    def _refuse(self, rule: str, message: str):
        return PolicyFileError(self.label, rule, f"policy '{self.policy}': {message}")

    def _check_built(self, spec, inputs, mem) -> None:
        if not isinstance(mem, Memory):
            raise self._refuse("type", f"build() returned a {type(mem).__name__}, not a "
                               f"crossprofile_lib.task.memory.Memory")
        if not isinstance(mem.text, str):
            raise self._refuse("type", f"build() returned a memory whose text is a {type(mem.text).__name__}, "
                               f"not a str")
        claims, tok, budget = (getattr(inputs, a, None) for a in ("claims", "tokenizer", "budget"))
        if spec is not None and claims is not None:
            check_memory(spec, mem, claims, budget)  # kept claims: trial/memory
        if tok is not None and budget is not None and spec is not None and spec.budgeted:
            n = tok.count(mem.text) if mem.text else 0
            if n > budget:
                raise self._refuse("budget", f"its memory text is {n} tokens by the run's tokenizer "
                                   f"({getattr(tok, 'name', type(tok).__name__)}), over its budget of {budget} tokens "
                                   f"(it reported {mem.tokens})")
        if self.kind == "unbudgeted" and inputs is not None:
            line = foreign_line(mem.text, claims, getattr(inputs, "transcript", None))
            if line is not None:
                raise self._refuse("facts", f"line {line[0]} of its memory text is in neither the discussion nor "
                                   f"the claim list: {line[1]!r:.160} (a memory may only state what was said)")


_MARKS = re.compile(r"^[\s\-*\u2022>#\d.)]*(?:[A-Za-z][\w-]{0,15}\s*:\s*)?")


def foreign_line(text: str, cl, transcript) -> Optional[tuple[int, str]]:
    """The first line of ``text`` (its number, itself) that comes from neither the discussion nor the
    claim list (see the module doc, rule ``facts``); None when every line does."""
    said = transcript.render() if transcript is not None else ""
    claims = [c.text for c in (cl.claims if cl is not None else ())]
    for i, line in enumerate(str(text).splitlines(), 1):
        s = line.strip()
        if not any(ch.isalnum() for ch in s):
            continue
        body = _MARKS.sub("", s).strip()
        if s in said or (body and body in said) or any(c and c in s for c in claims):
            continue
        return i, s
    return None


def _guarded(p: Policy, label: str, path: str) -> Policy:
    """``p`` with its functions wrapped in :class:`Guard`."""
    fields = {k: Guard(getattr(p, k), label, path, p.name, k, p.kind) for k in ("order", "packer", "build")
              if callable(getattr(p, k))}
    return dataclasses.replace(p, **fields)
