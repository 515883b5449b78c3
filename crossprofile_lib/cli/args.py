"""The command line's shared argument types: every option is parsed by an argparse ``type=`` function here,
so a bad command line stops with exit 2 and a message naming the option and the rule before any work. The
rules are the configuration models' (:mod:`crossprofile_lib.config`); :func:`build_config` names the option
of any field a model refuses; :func:`unsupported_policies` checks a policy against the chosen backend.
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import sys
import tempfile
from pathlib import Path

from pydantic import ValidationError

from crossprofile_lib.config import Budget, check_seed, check_variants, distinct, rule_errors
from crossprofile_lib.design import DEFAULT_POLICIES
from crossprofile_lib.safety.redact import is_secret_name

ArgError = argparse.ArgumentTypeError


def plain(doc: str) -> str:
    """A docstring as ``--help`` prints it: Sphinx roles (``:func:`~a.b.c```) as their last name (``c``), literals
    without their double backquotes."""
    def role(m: re.Match) -> str:
        return m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2).lstrip(".")
    return re.sub(r":[a-z]+:`(~?)([^`]+)`", role, doc).replace("``", "")


def fail(message, status: int) -> int:
    """Print ``error: MESSAGE`` on stderr and return the exit status."""
    print(f"error: {message}", file=sys.stderr)
    return status


def csv(s: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (blank items dropped)."""
    return [x.strip() for x in s.split(",") if x.strip()]


def _items(s: str, what: str, example: str) -> list[str]:
    """A non-empty comma-separated list without repeats or empty items (``R1,,ALL`` or ``R1,ALL,`` is refused: a
    list with a hole is most likely one with a name missing)."""
    items = csv(s)
    if not items:
        raise ArgError(f"empty list: give at least one {what}, comma-separated (e.g. {example})")
    parts = s.split(",")
    blank = next((i for i, x in enumerate(parts) if not x.strip()), None)
    if blank is not None:
        where = ("at the start" if blank == 0 else "at the end" if blank == len(parts) - 1
                 else f"after '{parts[blank - 1].strip()}'")
        raise ArgError(f"'{s}' has an empty item {where} (two commas in a row, or a comma at an end): name every "
                       f"{what}, e.g. {example}")
    return _checked(distinct, items, what)


def _distinct_values(s: str, parse, what: str, example: str) -> list:
    """``parse`` of each item of a non-empty list, refused when two items give the same value (``1,01``;
    ``0.6,0.60`` or ``128t,t128``: one budget label)."""
    out = [parse(x) for x in _items(s, what, example)]
    if len(set(out)) < len(out):
        raise ArgError(f"'{s}' names the same {what} twice: each {what} may appear once")
    return out


def _checked(check, *args):
    """``check(*args)``, its ``ValueError`` an argparse error (exit 2, naming the option)."""
    try:
        return check(*args)
    except ValueError as e:
        raise ArgError(str(e)) from None


_INT = re.compile(r"^[+-]?[0-9]+$")  # ASCII digits only (int() would also read Arabic-Indic digits)


# --- numbers --------------------------------------------------------------------------------

def int_between(low: int, high: int | None = None):
    """argparse type: an integer in ``[low, high]`` (``high`` None: no maximum)."""
    def parse(s: str) -> int:
        if not _INT.match(s.strip()):
            raise ArgError(f"'{s}' is not an integer")
        v = int(s)
        if v < low:
            raise ArgError(f"{v} is below the minimum {low}")
        if high is not None and v > high:
            raise ArgError(f"{v} is above the maximum {high}")
        return v
    return parse


positive_int = int_between(1)


#: Upper bounds of counts whose memory or time grows with them (a larger value stops with exit 2
#: instead of a MemoryError or a run that never ends).
MAX_RESAMPLES = 1_000_000
MAX_FIT_RESAMPLES = 100_000


def positive_float(s: str) -> float:
    """argparse type: a finite number > 0 (ASCII digits)."""
    try:
        if not s.isascii():
            raise ValueError
        v = float(s)
    except ValueError:
        raise ArgError(f"'{s}' is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise ArgError(f"{s} is not a finite number above 0")
    return v


def seconds(s: str) -> float:
    """argparse type: a finite number of seconds above 0 and at most a day."""
    v = positive_float(s)
    if v > 86_400:
        raise ArgError(f"{s} seconds is more than a day (at most 86400)")
    return v


def seed(s: str) -> int:
    """argparse type: one seed, an integer in [0, 2^32 - 1]."""
    s = s.strip()
    if not _INT.match(s):
        raise ArgError(f"seed '{s}' is not an integer")
    return _checked(check_seed, int(s))


def seeds(s: str) -> list[int]:
    """argparse type: comma-separated distinct seeds (``0,1,2``)."""
    return _distinct_values(s, seed, "seed", "0,1,2")


# --- budgets, policies, variants -------------------------------------------------------------

#: The largest fixed-k (a template has 12 claims; HiddenBench tasks a few dozen).
MAX_FIXED_K = 1000


def budget(s: str) -> Budget:
    """One budget: a ratio in (0, 1] (``0.6``) or a token count above 0 (``128t``)."""
    return _checked(Budget, s)


def budgets(s: str) -> list[str]:
    """argparse type: comma-separated distinct budgets (``0.4,0.6,128t``)."""
    return _distinct_values(s, budget, "budget", "0.6,128t")


def policies(s: str) -> list[str]:
    """argparse type: comma-separated distinct policy specs, each one the registry knows."""
    from crossprofile_lib.policies import parse_policy  # the command line's imports are lazy: fast --help
    out = _items(s, "policy", "R1,ALL")
    for p in out:
        if not p.isascii():
            raise ArgError(f"policy '{p}': policy names are ASCII (e.g. R1-k7)")
        try:
            spec = parse_policy(p)
        except ValueError as e:
            raise ArgError(f"{e}; the default grid is {','.join(DEFAULT_POLICIES)}") from None
        if spec.fixed_k is not None and spec.fixed_k > MAX_FIXED_K:
            raise ArgError(f"policy '{p}': a fixed-k policy keeps at most {MAX_FIXED_K} claims")
    return out


def variants(s: str) -> list[str]:
    """argparse type: comma-separated distinct variants (three letters of P/S)."""
    return _checked(check_variants, _items(s, "variant", "PSP,SPS"))


def ablations(s: str) -> list[str]:
    """argparse type: comma-separated distinct HiddenBench prompt ablations (or ``all``)."""
    from crossprofile_lib.hiddenbench.ablations import get_ablation
    out = _items(s, "ablation", "all")
    for a in out:
        if a != "all":
            _checked(get_ablation, a)
    return out


def names(s: str) -> list[str]:
    """argparse type: a non-empty comma-separated list of distinct names (task ids, ...)."""
    return _items(s, "name", "a,b")


# --- backends --------------------------------------------------------------------------------

def backend(s: str) -> str:
    """argparse type: ``ledger`` or ``provider/model`` with a known provider."""
    from crossprofile_lib.backends import check_backend_spec
    return _checked(check_backend_spec, s)


def backend_class(backend_spec: str):
    """The backend's class (no model loaded); None when its module cannot be imported (a missing SDK)."""
    from crossprofile_lib.backends import provider_class
    try:
        return provider_class(backend_spec.partition("/")[0])
    except ImportError:
        return None


def refuse_unknown_backend_options(parser, backend_spec: str, options: dict, flags=None) -> None:
    """``parser.error`` (exit 2) when the backend's class (its signature; no model loaded) does not take one of
    ``options``; ``flags``: option -> the flag that set it (default ``--backend-option KEY``)."""
    cls = backend_class(backend_spec)
    params = inspect.signature(cls).parameters if cls is not None else None
    if params is None or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    accepted = [k for k in params if k not in ("model", "tokenizer")]
    unknown = sorted(k for k in options if k not in accepted)
    if unknown:
        given = ", ".join((flags or {}).get(k, f"--backend-option {k}") for k in unknown)
        parser.error(f"argument {given}: backend '{backend_spec}' does not take "
                     f"{'these options' if len(unknown) > 1 else 'this option'} "
                     f"(it takes: {', '.join(accepted) or 'no options'})")


def unsupported_policies(backend_spec: str, policy_specs) -> dict[str, str]:
    """Policy -> why the backend cannot run it (from its class's declared capabilities)."""
    from crossprofile_lib.run.pipeline import unsupported
    cls = backend_class(backend_spec)
    return {} if cls is None else unsupported(policy_specs, cls)


def build_config(parser, cls, flags: dict, **fields):
    """``cls(**fields)``, or ``parser.error`` (exit 2) naming the option of the first field the model refuses
    and its rule; ``flags``: field -> option (default ``--field-name``)."""
    try:
        return cls(**fields)
    except ValidationError as e:
        fld, _, msg = rule_errors(e)[0]
        top = re.split(r"[.\[]", fld, maxsplit=1)[0]
        parser.error(f"argument {flags.get(top, '--' + top.replace('_', '-'))}: {msg}")


def option_value(v: str):
    """A ``KEY=VALUE`` value, typed: int (``8``), float (``-0.5``, ``inf``), bool (``true``, any case), else
    the string."""
    s = v.strip()
    if not s.isascii():
        return v
    if _INT.match(s):
        return int(s)
    try:
        return float(s)
    except ValueError:
        return s.lower() == "true" if s.lower() in ("true", "false") else v


def backend_option(s: str) -> tuple[str, object]:
    """argparse type of ``--backend-option KEY=VALUE``: ``(key, typed value)``, dashes in the key become
    underscores; a secret-named key (``api_key``) keeps its value as the string given."""
    k, eq, v = s.partition("=")
    k = k.strip()
    if not eq or not k:
        raise ArgError(f"'{s}' is not KEY=VALUE")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", k):
        raise ArgError(f"'{k}' is not an option name (letters, digits, '_' or '-')")
    return k.replace("-", "_"), (v if is_secret_name(k) else option_value(v))


# --- paths -----------------------------------------------------------------------------------

def _path_arg(s: str, problem) -> str:
    if problem:
        raise ArgError(f"'{s[:80]}{'...' if len(s) > 80 else ''}': {problem}")
    return s


def path_name(s: str) -> str:
    """argparse type of any path: a name the file system can hold (``safety.inputs.path_problem``)."""
    from crossprofile_lib.safety.inputs import path_problem
    return _path_arg(s, path_problem(s))


def input_file(s: str) -> str:
    """argparse type of an input file: an existing, readable regular file (``safety.inputs.input_file_problem``)."""
    from crossprofile_lib.safety.inputs import input_file_problem
    return _path_arg(s, input_file_problem(s))


def out_dir(s: str) -> str:
    """argparse type of ``--out``: a folder this process can create and write (probed with a temporary file in
    it or its nearest existing parent, so nothing is left behind)."""
    if not s.strip():
        raise ArgError("empty path")
    path_name(s)
    p = Path(s)
    if p.exists() and not p.is_dir():
        raise ArgError(f"'{s}' is a file, not a folder")
    probe = p
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ArgError(f"'{s}' cannot be created: '{probe}' is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe, prefix=".crossprofile-probe-"):
            pass
    except OSError as e:
        what = "is not writable" if probe == p else f"cannot be created: '{probe}' is not writable"
        raise ArgError(f"'{s}' {what} ({e.strerror or e})") from None
    return s


def template_path(s: str) -> str:
    """argparse type of a template file, folder or glob: it must name at least one file."""
    from crossprofile_lib.task.templates import template_paths
    path_name(s)
    try:
        found = template_paths([s])
    except FileNotFoundError as e:
        raise ArgError(str(e)) from None
    if not found:
        raise ArgError(f"folder '{s}' holds no template files (*.yaml)")
    return s


# --- options given twice ---------------------------------------------------------------------

class _StoreOnce(argparse._StoreAction):
    """A ``store`` option that may appear once (argparse would silently keep the last)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_options_given", {})
        this = f"{option_string or self.option_strings[0]} {_shown(values)}"
        if self.dest in given:
            parser.error(f"argument {'/'.join(self.option_strings)}: given twice ({given[self.dest]} and {this}); "
                         "give it once")
        given[self.dest] = this
        super().__call__(parser, namespace, values, option_string)


def _shown(values) -> str:
    from crossprofile_lib.safety.redact import redact_argv
    vals = values if isinstance(values, list) else [values]
    out = " ".join(redact_argv(str(v) for v in vals))
    return out if len(out) <= 60 else out[:57] + "..."


def refuse_repeats(parser: argparse.ArgumentParser) -> None:
    """Make every single-value option of ``parser`` and its subcommands refuse to be given twice (exit 2
    naming both values); ``append`` options stay repeatable."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in dict.fromkeys(a.choices.values()):
                refuse_repeats(sub)
        elif type(a) is argparse._StoreAction and a.option_strings:
            a.__class__ = _StoreOnce


# --- --policy-file and --policy-timeout ----------------------------------------------------------
# Read from argv before the command line is parsed and the files loaded (:func:`preload_policy_files`), so
# ``--policies Mine`` is checked against a registry that knows ``Mine`` (crossprofile_lib.policies.plugins).

POLICY_FILE_HELP = ("a Python file (or module:object) defining POLICY or POLICIES, memory policies of your own "
                    "(book/reference-policies.md); repeatable; loaded and checked before anything else")


def add_policy_file_option(p) -> None:
    """``--policy-file FILE`` (repeatable) and ``--policy-timeout SECONDS``."""
    p.add_argument("--policy-file", dest="policy_files", action="append", default=[], metavar="FILE",
                   help=POLICY_FILE_HELP)
    p.add_argument("--policy-timeout", type=policy_timeout, default=None, metavar="SECONDS",
                   help="time limit of each call into a policy file's code (its import, order, packer, build); "
                        "default $CROSSPROFILE_POLICY_TIMEOUT, else 30; 0: none")


def policy_timeout(s: str) -> float:
    """argparse type of ``--policy-timeout``: seconds in [0, 86400] (0: no limit)."""
    try:
        v = float(s) if s.isascii() else math.nan
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or not 0 <= v <= 86_400:
        raise ArgError(f"'{s}' is not a number of seconds in [0, 86400] (0: no limit)")
    return v


def _argv_values(argv, flag: str) -> list[str]:
    """The values of every ``FLAG X`` / ``FLAG=X`` in ``argv`` before ``--``, in order."""
    out, it = [], iter(argv)
    for a in it:
        if a == "--":
            break
        if a == flag:
            out.append(next(it, None))
        elif a.startswith(flag + "="):
            out.append(a.partition("=")[2])
    return out


def policy_file_values(argv) -> list[str]:
    """The values of every ``--policy-file`` in ``argv``, in order."""
    return [v for v in _argv_values(argv, "--policy-file") if v is not None]


def preload_policy_files(argv) -> list:
    """Load (and check) the policy files named in ``argv``: ``ArgError`` for a bad ``--policy-timeout``,
    ``PolicyFileError`` naming the file and the rule."""
    from crossprofile_lib.policies.plugins import TIMEOUT, load_all
    t = (_argv_values(argv, "--policy-timeout") or [None])[-1]   # the last one given, unchecked
    if t is not None:
        TIMEOUT[0] = policy_timeout(t)
    return load_all(policy_file_values(argv))
