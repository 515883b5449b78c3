"""The rules a policy of your own must keep and the guard around its code (both described in :mod:`.plugins`):
:func:`check_order` / :func:`check_memory` on what it returns, :class:`Guard` around every call into it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import os
import re
import signal
import sys
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from crossprofile_lib.policies.registry import Policy
from crossprofile_lib.safety.redact import redact_text
from crossprofile_lib.task.memory import Memory


class PolicyFileError(ValueError):
    """A policy file (or module, or entry point) breaks a rule; ``str()`` names it and the rule (redacted: a
    memory line it quotes may hold a key from the environment)."""

    def __init__(self, source: str, rule: str, message: str):
        self.source, self.rule = str(source), rule
        super().__init__(redact_text(f"{source}: {rule}: {message}"))


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


def _cwd() -> Optional[str]:
    try:
        return os.getcwd()
    except OSError:
        return None


@contextmanager
def contained(label: str, what: str, path: str = "", rule: Optional[str] = None):
    """Run a block of a policy file's code (its import, a call, what the suite does with its return values) so
    that nothing it does ends the command in another way than a refusal: every exception, ``SystemExit``,
    ``GeneratorExit`` and any other ``BaseException`` included, becomes a :class:`PolicyFileError` naming ``label``,
    ``what`` and the rule (``rule``, else ``trial`` while loading, ``memory`` in a run). A ``KeyboardInterrupt``
    is the user's Ctrl-C only when SIGINT arrived during the block; one the code raises itself is refused like
    the rest. The block runs under the time limit (:func:`limited`), and a working folder it changed
    (``os.chdir``) is changed back, with a notice, so relative paths keep meaning what the user typed."""
    cwd = _cwd()
    pressed = [False]
    prev = None
    if threading.current_thread() is threading.main_thread():
        prev = signal.getsignal(signal.SIGINT)
        if callable(prev):
            def on_int(signum, frame):
                pressed[0] = True
                prev(signum, frame)
            signal.signal(signal.SIGINT, on_int)
        else:
            prev = None
    try:
        with limited(label, what):
            yield
    except PolicyFileError:
        raise
    except BaseException as e:  # noqa: BLE001  (a user's file may raise anything, SystemExit included)
        if isinstance(e, _Overtime) or (isinstance(e, KeyboardInterrupt) and pressed[0]) or getattr(
                e, _SUITES, False):
            raise
        told = f"{type(e).__name__}" + (f": {e}" if str(e) else "")
        why = (" (a policy file may not end or interrupt the command)"
               if isinstance(e, (SystemExit, KeyboardInterrupt, GeneratorExit)) or not isinstance(e, Exception)
               else "")
        raise PolicyFileError(label, rule or ("trial" if TRIAL[0] else "memory"),
                              f"{what} raised {told}{_where(e, path) if path else ''}{why}") from None
    finally:
        if prev is not None:
            signal.signal(signal.SIGINT, prev)
        if cwd is not None and _cwd() != cwd:
            try:
                os.chdir(cwd)
                print(f"notice: {label}: {what} changed the working folder (os.chdir); changed back to {cwd}, so "
                      f"relative paths (--out, --templates, ...) mean what you typed", file=sys.stderr)
            except OSError:
                pass


#: set on an exception the suite's own code raised while a policy called it (a tokenizer's server down, the
#: backend's circuit breaker in ``summarise``): :func:`contained` lets it through unchanged
_SUITES = "_crossprofile_suite_error"


class _SuiteCall:
    """A suite callable handed to a policy (``summarise``, a tokenizer's methods): what it raises is the suite's
    own failure (exit 1 for a server that went away), never blamed on the policy file."""

    __slots__ = ("_fn",)

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, *args, **kwargs):
        try:
            return self._fn(*args, **kwargs)
        except (TypeError, AttributeError):  # called the wrong way: the policy's mistake
            raise
        except BaseException as e:
            try:
                setattr(e, _SUITES, True)
            except AttributeError:
                pass
            raise


class _ReadOnlyView:
    """A read-only view of a shared object (the run's tokenizer): attributes read through (methods as
    :class:`_SuiteCall`), none set."""

    __slots__ = ("_read",)

    def __init__(self, obj):
        object.__setattr__(self, "_read", lambda name: getattr(obj, name))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        v = self._read(name)
        return _SuiteCall(v) if callable(v) else v

    def __setattr__(self, name, value):
        raise AttributeError(f"the run's {name} is read-only to a policy")

    __delattr__ = __setattr__


def private_copies(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """What a policy file's function receives: its own deep copies of the claim list, transcript, task and
    stances (changing them changes nothing of the run's, nor another policy's row), the run's tokenizer as a
    read-only view, the policy's own random generator and the ``summarise`` callable as they are (the generator
    is drawn per policy and memory, so its draws stay the policy's own)."""
    memo: dict = {}
    for a in (*args, *kwargs.values()):
        if dataclasses.is_dataclass(a) and not isinstance(a, type):  # PolicyContext, PolicyInputs
            for name in ("rng", "tokenizer", "summarise", "policy"):
                v = getattr(a, name, None)
                if v is not None and id(v) not in memo:
                    memo[id(v)] = (_ReadOnlyView(v) if name == "tokenizer" else _SuiteCall(v) if name == "summarise"
                                   else v)
        elif hasattr(a, "count") and hasattr(a, "name") and not isinstance(a, (str, list, tuple)):
            memo[id(a)] = _ReadOnlyView(a)  # a packer's tokenizer argument
    return copy.deepcopy(tuple(args), memo), copy.deepcopy(dict(kwargs), memo)


class Guard:
    """A policy file's function as the registry calls it: on private copies of its inputs
    (:func:`private_copies`), under :func:`contained` (the time limit; any exception or exit refused as
    :class:`PolicyFileError`, rule ``trial``/``memory``), a ``build``'s memory recounted and checked against the
    discussion (see the module doc). Picklable when the function is."""

    def __init__(self, fn, label: str, path: str, policy: str, what: str, kind: str):
        self.fn, self.label, self.path, self.policy, self.what, self.kind = fn, label, path, policy, what, kind
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        what = f"policy '{self.policy}': {self.what}()"
        with contained(self.label, what, self.path):
            own_args, own_kwargs = private_copies(args, kwargs)
            out = self.fn(*own_args, **own_kwargs)
            if self.what == "build":
                out = self._check_built(args[0] if args else kwargs.get("spec"), args[1] if len(args) > 1 else
                                        kwargs.get("inputs"), out)
            elif self.what in ("order", "packer"):
                out = list(out) if not isinstance(out, (str, bytes)) and hasattr(out, "__iter__") else out
        return out

    def _refuse(self, rule: str, message: str):
        return PolicyFileError(self.label, rule, f"policy '{self.policy}': {message}")

    def _check_built(self, spec, inputs, mem) -> Memory:
        if not isinstance(mem, Memory):
            raise self._refuse("type", f"build() returned a {type(mem).__name__}, not a "
                               f"crossprofile_lib.task.memory.Memory")
        if type(mem.text) is not str:
            raise self._refuse("type", f"build() returned a memory whose text is a {type(mem.text).__name__}, "
                               f"not a str")
        claims, tok, budget = (getattr(inputs, a, None) for a in ("claims", "tokenizer", "budget"))
        if spec is not None and claims is not None:
            check_memory(spec, mem, claims, budget)  # kept claims: trial/memory
            mem = own_memory(mem, claims)
        if tok is not None and budget is not None and spec is not None and spec.budgeted:
            n = tok.count(mem.text) if mem.text else 0
            if n > budget:
                raise self._refuse("budget", f"its memory text is {n} tokens by the run's tokenizer "
                                   f"({getattr(tok, 'name', type(tok).__name__)}), over its budget of {budget} tokens "
                                   f"(it reported {mem.tokens})")
        if self.kind == "unbudgeted" and inputs is not None:
            line = foreign_line(mem.text, claims, getattr(inputs, "transcript", None))
            if line is not None:
                raise self._refuse("facts", f"line {line[0]} of its memory text is in neither the discussion nor the "
                                   f"claim list: {line[1]!r:.160} (a memory may only state what was said: each line "
                                   f"must equal a line of the discussion or a claim line, with or without its "
                                   f"label, nothing added)")
        return mem


def own_memory(mem: Memory, cl) -> Memory:
    """``mem`` (checked by :func:`check_memory`) rebuilt of plain values: its kept claims are the run's own claim
    objects (not the policy's copies), its fields plain ``str``/``int``/``bool``/``tuple``/``dict``."""
    canon = {c: c for c in cl.claims}
    try:
        return Memory(str.__str__(str(mem.policy)), str.__str__(str(mem.kind)), tuple(canon[c] for c in mem.kept),
                      tuple(int(n) for n in mem.revealed), str.__str__(mem.text), int(mem.tokens),
                      bool(mem.truncated), dict(mem.meta or {}))
    except (TypeError, ValueError, KeyError) as e:
        raise refusal_for(mem.policy, f"its memory cannot be read as plain values ({type(e).__name__}: {e})") \
            from None


def refusal_for(policy: str, problem: str) -> PolicyFileError:
    src = PLUGINS.get(str(policy))
    return PolicyFileError(src.spec if src else str(policy), "trial" if TRIAL[0] else "memory", problem)


#: A list mark before a memory line (``-``, ``*``, ``•``, ``1.``, ``2)``): layout, not content.
_LIST_MARK = re.compile(r"^(?:[-*\u2022]|\d{1,3}[.)])\s+")
#: A claim's label as a provenance format writes it: ``[A1,A3]``, ``[A3]``, ``[C07]`` (agents or a claim id).
_LABEL = re.compile(r"^\[([^\[\]]{1,200})\]\s+")
#: A transcript line's speaker label (``A3: ``).
_SPEAKER = re.compile(r"^[^\s:]{1,40}:\s+(.*)$")


def foreign_line(text: str, cl, transcript) -> Optional[tuple[int, str]]:
    """The first line of ``text`` (its number, itself) that is neither a line of the discussion nor a claim line
    (see the module doc, rule ``facts``); None when every line is one. A line must *equal* one of them, after an
    optional list mark: a transcript line (``A3: text``) or an utterance's text; a claim's text, with or without
    a label naming agents of the discussion or a claim id (``[A1,A3] text``, ``[C07] text``). Nothing may be added
    (``claim, answer B``, ``It is false that claim`` are refused); lines without a letter or digit (``---``) are
    layout and pass."""
    said: set[str] = set()
    if transcript is not None:
        for ln in transcript.render().splitlines():
            said.add(ln.strip())
            m = _SPEAKER.match(ln.strip())
            if m:  # the line without its speaker label
                said.add(m.group(1).strip())
        for u in getattr(transcript, "utterances", ()):
            said.update(ln.strip() for ln in str(u.text).splitlines())
    claims = {c.text.strip() for c in (cl.claims if cl is not None else ())}
    agents = set(getattr(cl, "agents", ()) or ()) | set(getattr(cl, "speaker_order", ()) or ())
    for c in (cl.claims if cl is not None else ()):
        agents.update(c.speakers)
    said.discard("")
    for i, line in enumerate(str(text).splitlines(), 1):
        s = line.strip()
        if not any(ch.isalnum() for ch in s):
            continue
        body = _LIST_MARK.sub("", s, count=1)
        if s in said or body in said or body in claims:
            continue
        m = _LABEL.match(body)
        if m and body[m.end():] in claims and all(
                a.strip() in agents or re.fullmatch(r"C\d{1,4}", a.strip()) for a in m.group(1).split(",")):
            continue
        return i, s
    return None


def _guarded(p: Policy, label: str, path: str) -> Policy:
    """``p`` with its functions wrapped in :class:`Guard`."""
    fields = {k: Guard(getattr(p, k), label, path, p.name, k, p.kind) for k in ("order", "packer", "build")
              if callable(getattr(p, k))}
    return dataclasses.replace(p, **fields)
