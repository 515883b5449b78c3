"""Your own memory policy: the plug-in interface.

A policy of your own is a :class:`~crossprofile_lib.policies.registry.Policy` declared as the built-ins are
(``kind``, ``needs``, an ``order`` for a copy policy or a ``build`` for the others). It comes from a **Python
file** (``--policy-file my_policy.py``, ``make book POLICY_FILES=...``) defining ``POLICY`` or ``POLICIES``; a
**module object** ``package.module[:NAME]``; or an **installed package**'s entry point in the group
:data:`ENTRY_POINT_GROUP` (``crossprofile.policies``), loaded the first time the registry meets an unknown name.
Once loaded it works like a built-in (``Mine``, ``Mine-k7``, ``Mine:unlabeled``, composition, stats, the book).

Rules (each broken one raises :class:`PolicyFileError` naming the file and the rule, before any work starts):
``import`` the file imports; ``attribute`` it defines ``POLICY``/``POLICIES`` (or the named object); ``type``
each is a ``Policy``; ``name`` letters, digits, ``_ . -``, not ending in ``-kN``; ``clash`` no built-in's or
another file's name; ``trial`` on a bundled template (two variants, budget 0.6, the offline tokenizer) it keeps
only claims of the claim list, each once, within a budget (an ``order`` returns indices ``0..n-1``, none twice);
a ``generated`` policy needs a model and gets no trial.

The same checks run on every memory a plug-in builds in a run (:func:`.guard.check_memory`), and every call into the
file's code (import, ``order``, ``packer``, ``build``) is guarded (:mod:`.guard`):

* ``file``: the file is read through the safe-input layer first (a regular file of at most
  :data:`POLICY_FILE_MAX_BYTES`): a FIFO, a device or a socket is refused before it is opened;
* ``raises``: anything the code raises -- an exception, ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``,
  any ``BaseException`` -- is refused naming the file, policy, function and line (rule ``import`` at import,
  ``trial`` while loading, ``memory`` in a run), exit 2, never a traceback, never a silent exit; only a SIGINT
  that really arrived during the call is the user's Ctrl-C (:func:`.guard.contained`);
* ``copies``: each call gets its own deep copies of the claim list, transcript, task and stances and a read-only
  view of the run's tokenizer (:func:`.guard.private_copies`); a memory it returns is rebuilt on the run's own
  claim objects, so changing what it was handed changes no other policy's row;
* ``time``: a call running past the limit (:func:`time_limit`: ``--policy-timeout``, else
  ``$CROSSPROFILE_POLICY_TIMEOUT``, else :data:`DEFAULT_TIMEOUT` seconds; 0 turns it off) is stopped and
  refused. The limit is a ``SIGALRM`` timer on the main thread: code called from another thread, or a C
  extension that never returns to the interpreter, runs without a limit;
* ``budget``: a ``build`` policy's text is recounted with the run's tokenizer; over budget is refused;
* ``facts``: every line of an ``unbudgeted`` policy's text must EQUAL a line of the discussion (``A3: text``, with
  or without the speaker) or a claim line (the claim's text, with or without a label naming agents of the
  discussion or a claim id), after an optional list mark; nothing added (:func:`.guard.foreign_line`). A
  ``generated`` policy's text is the model's own words and is not checked line by line;
* the working folder: an ``os.chdir`` in the file is undone after the call, with a notice; threads the file
  leaves running do not keep the command alive (``crossprofile_lib.cli.main``).

The file runs with the user's own rights in the suite's process: the guard contains mistakes and misbehaviour
of the kinds above, it is no sandbox against code written to do harm (``os._exit``, writing files).

:func:`sources` lists what was loaded (path, SHA-256, policies); ``run.json`` records it as ``policy_files``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Optional

import numpy as np

from crossprofile_lib.config import Budget
from crossprofile_lib.paths import dev_templates_dir, file_sha256
from crossprofile_lib.policies.guard import (  # noqa: F401  (re-exported)
    DEFAULT_TIMEOUT,
    PLUGINS,
    TIMEOUT,
    TIMEOUT_ENV,
    TRIAL,
    PolicyFileError,
    PolicySource,
    _guarded,
    _where,
    contained,
    foreign_line,
    limited,
    time_limit,
)
from crossprofile_lib.policies.registry import _SPEC, REGISTRY, UNKNOWN_BASE_HOOKS, Policy, parse_policy
from crossprofile_lib.policies.select import select_memory
from crossprofile_lib.safety.inputs import InputError, read_bytes
from crossprofile_lib.task.budgets import t_all
from crossprofile_lib.task.discussion import claim_list, make_task, scripted_discussion
from crossprofile_lib.task.evidence import oracle_relevance, oracle_stances
from crossprofile_lib.task.templates import load_template
from crossprofile_lib.task.tokenizer import default_tokenizer
from crossprofile_lib.task.variants import agent_names

#: The entry-point group installed packages declare their policies in.
ENTRY_POINT_GROUP = "crossprofile.policies"

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_FIXED_K = re.compile(r"-k\d+$")

def builtins() -> frozenset[str]:
    """The built-in policy names (the registry without the plug-ins)."""
    return frozenset(n for n in REGISTRY if n not in PLUGINS)


_LOADED: dict[str, PolicySource] = {}   # spec -> source (loading twice is a no-op)
_installed_loaded = False


def _source(origin: str, spec: str, f, pols: list[Policy], sha: str = "") -> PolicySource:
    """The record of where ``pols`` came from: the resolved file ``f`` (if any) and its SHA-256 (``sha``: of the
    bytes already read)."""
    return PolicySource(origin, spec, str(Path(f).resolve()) if f else "", sha or (file_sha256(f) if f else ""),
                        tuple(p.name for p in pols))


#: The largest policy file read (a policy is a page of Python; the cap keeps /dev/zero-like files out).
POLICY_FILE_MAX_BYTES = 4 << 20


def _exec_file(path: Path, label: str):
    """``(module, sha256)``: the file read through the safe-input layer (a regular file, so a FIFO, a device or a
    socket is refused before it is opened; at most :data:`POLICY_FILE_MAX_BYTES`), then executed contained."""
    if not path.exists() and not path.is_symlink():
        raise PolicyFileError(label, "exists", "no such file")
    if path.is_dir() or path.suffix != ".py":
        raise PolicyFileError(label, "type", "a policy file is one Python file (*.py)")
    try:
        data = read_bytes(path, POLICY_FILE_MAX_BYTES, what="policy file")
    except InputError as e:
        raise PolicyFileError(label, "file", f"{e.rule}: {e.detail}") from None
    sha = hashlib.sha256(data).hexdigest()
    name = f"crossprofile_user_policy_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{sha[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pickling look their module up
    try:
        with contained(label, "importing it", str(path), rule="import"):
            exec(compile(data, str(path), "exec"), mod.__dict__)  # noqa: S102  (the user's own policy file)
    except PolicyFileError:
        sys.modules.pop(name, None)
        raise
    return mod, sha


def _policies_of(obj, label: str, what: str) -> list[Policy]:
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not items:
        raise PolicyFileError(label, "attribute", f"{what} is an empty list (give at least one Policy)")
    for i, p in enumerate(items):
        if not isinstance(p, Policy):
            at = f"{what}[{i}]" if isinstance(obj, (list, tuple)) else what
            raise PolicyFileError(label, "type", f"{at} is a {type(p).__name__}, not a "
                                  f"crossprofile_lib.policies.Policy")
    return items


def _module_policies(mod, label: str, attr: Optional[str]) -> list[Policy]:
    if attr:
        if not hasattr(mod, attr):
            raise PolicyFileError(label, "attribute", f"the module has no attribute '{attr}'")
        return _policies_of(getattr(mod, attr), label, attr)
    for a in ("POLICIES", "POLICY"):
        if hasattr(mod, a):
            return _policies_of(getattr(mod, a), label, a)
    raise PolicyFileError(label, "attribute", "defines neither POLICY (one Policy) nor POLICIES (a list of them)")


def _check_declaration(p: Policy, label: str) -> None:
    if not _NAME.match(p.name or ""):
        raise PolicyFileError(label, "name", f"policy name '{p.name}' must start with a letter and hold only "
                              f"letters, digits, '_', '.' or '-'")
    if _FIXED_K.search(p.name):
        raise PolicyFileError(label, "name", f"policy name '{p.name}' ends like the fixed-k suffix -kN "
                              f"(write the name without it; '{p.name}' would mean a fixed-k control)")
    if p.name in builtins():
        raise PolicyFileError(label, "clash", f"policy name '{p.name}' is a built-in policy (choose another name; "
                              f"built-ins: {', '.join(sorted(builtins()))})")
    if p.name in PLUGINS:
        raise PolicyFileError(label, "clash", f"policy name '{p.name}' is already registered by "
                              f"{PLUGINS[p.name].spec}")
    if p.kind == "copy" and not callable(p.order):
        raise PolicyFileError(label, "attribute", f"policy '{p.name}' is a copy policy: give order=callable(claims, ctx)")
    if p.kind != "copy" and not callable(p.build):
        raise PolicyFileError(label, "attribute", f"policy '{p.name}' ({p.kind}): give build=callable(spec, inputs)")
    if p.packer is not None and not callable(p.packer):
        raise PolicyFileError(label, "attribute", f"policy '{p.name}': packer must be callable")


def _trial(policies: list[Policy], label: str) -> None:
    """Build each policy's memory on a bundled template (see the module doc)."""
    tok = default_tokenizer()
    template = load_template(sorted(dev_templates_dir().glob("*.yaml"))[0])
    budget = Budget("0.6").tokens(t_all(template, tok, 4))
    TRIAL[0] = True
    try:
        for variant in ("PSP", "SPS"):
            task = make_task(template, variant, 0, 4)
            tr = scripted_discussion(task)
            cl = claim_list(tr, agent_names(4))
            for p in policies:
                if p.kind == "generated":
                    continue
                spec = parse_policy(p.name)
                try:
                    select_memory(spec, cl, budget, tok, np.random.default_rng(0), transcript=tr,
                                  relevant=frozenset(oracle_relevance(cl, task)),
                                  stances=oracle_stances(cl, task), task=task)
                except PolicyFileError:
                    raise
                except Exception as e:  # noqa: BLE001  (the user's code)
                    raise PolicyFileError(label, "trial", f"policy '{p.name}' failed on template {template.id} "
                                          f"({variant}, seed 0, budget 0.6): {type(e).__name__}: {e}") from None
    finally:
        TRIAL[0] = False


def _register(policies: list[Policy], source: PolicySource, label: str) -> PolicySource:
    names = [p.name for p in policies]
    if len(set(names)) < len(names):
        raise PolicyFileError(label, "clash", f"the same policy name appears twice ({', '.join(names)})")
    for p in policies:
        _check_declaration(p, label)
    for p in policies:
        REGISTRY[p.name] = _guarded(p, label, source.path)
        PLUGINS[p.name] = source
    try:
        _trial(policies, label)
    except PolicyFileError:
        for p in policies:
            REGISTRY.pop(p.name, None)
            PLUGINS.pop(p.name, None)
        raise
    _LOADED[source.spec] = source
    return source


# --- loading -----------------------------------------------------------------------------------

def load(spec: str) -> PolicySource:
    """Load and register the policies of ``spec``: a Python file path or ``module[:object]``
    (see the module doc). Loading the same spec twice is a no-op. Raises :class:`PolicyFileError`."""
    spec = str(spec).strip()
    if not spec:
        raise PolicyFileError("<policy file>", "exists", "empty path")
    if spec in _LOADED:
        return _LOADED[spec]
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.exists() or "/" in spec or "\\" in spec:
        same = _same_file_loaded(path)
        if same is not None:  # the same file under another spelling (../mine/p.py and /home/me/mine/p.py)
            _LOADED[spec] = same
            return same
        mod, sha = _exec_file(path, spec)
        with contained(spec, "reading POLICY/POLICIES", str(path), rule="attribute"):
            pols = _module_policies(mod, spec, None)
        return _register(pols, _source("file", spec, path, pols, sha), spec)
    modname, _, attr = spec.partition(":")
    with contained(spec, f"importing module '{modname}'", rule="import"):
        mod = importlib.import_module(modname)
    with contained(spec, "reading its policies", rule="attribute"):
        pols = _module_policies(mod, spec, attr or None)
    return _register(pols, _source("module", spec, getattr(mod, "__file__", None), pols), spec)


def _same_file_loaded(path: Path) -> Optional[PolicySource]:
    """The source already loaded from the file ``path`` names (the same real path and the same bytes), else None."""
    try:
        if not path.is_file():
            return None
        real = str(path.resolve())
        sha = None
        for s in _LOADED.values():
            if s.origin == "file" and s.path == real:
                sha = sha or file_sha256(path)
                return s if s.sha256 == sha else None
    except OSError:
        return None
    return None


def load_all(specs) -> list[PolicySource]:
    """:func:`load` each of ``specs`` in order."""
    return [load(s) for s in specs]


def load_installed() -> list[PolicySource]:
    """Load every entry point of :data:`ENTRY_POINT_GROUP` (once per process)."""
    global _installed_loaded
    if _installed_loaded:
        return []
    _installed_loaded = True
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", "?")
        label = f"entry point '{ep.name} = {ep.value}' ({ENTRY_POINT_GROUP}, package {dist})"
        if any(s.spec == label for s in _LOADED.values()):
            continue
        with contained(label, "loading it", rule="import"):
            obj = ep.load()
        pols = _policies_of(obj, label, ep.value)
        f = getattr(sys.modules.get(ep.module), "__file__", None)
        out.append(_register(pols, _source("entry point", label, f, pols), label))
    return out


def sources(policy_names=None) -> list[dict]:
    """What was loaded (each :class:`PolicySource` as a dict), only those behind ``policy_names`` (bases or
    specs) when given; empty when no plug-in is involved."""
    bases = None if policy_names is None else {base(n) for n in policy_names}
    return [s.as_dict() for s in dict.fromkeys(s for n, s in PLUGINS.items() if bases is None or n in bases)]


def base(spec: str) -> str:
    """The base name of a policy spec (``Mine-k7:unlabeled`` -> ``Mine``)."""
    m = _SPEC.match(str(spec).strip())
    return m.group("base") if m else str(spec)


def ensure_recorded(records, where: str = "run.json") -> None:
    """Load the policy files a run header recorded (``policy_files``) whose policies are not registered:
    from the recorded path when the file is there with the same SHA-256, else a :class:`PolicyFileError`
    saying which file to pass (``--policy-file``)."""
    for r in records or ():
        missing = [n for n in r.get("policies", ()) if n not in REGISTRY]
        if not missing:
            continue
        path = r.get("path", "")
        if r.get("origin") == "file" and path and Path(path).is_file():
            if file_sha256(path) != r.get("sha256"):
                raise PolicyFileError(path, "hash", f"{where} records this policy file with SHA-256 "
                                      f"{r.get('sha256', '')[:12]}..., but the file has changed since; pass the file "
                                      f"that produced the run with --policy-file")
            load(path)
        else:
            raise PolicyFileError(r.get("spec", path or "?"), "exists",
                                  f"{where} names policies {', '.join(missing)} from this source; pass it with "
                                  f"--policy-file")


def _unknown_base_hook(base: str) -> bool:
    """The registry's fallback for a name it does not know: load the installed packages' policies."""
    if _installed_loaded:
        return False
    load_installed()
    return base in REGISTRY


UNKNOWN_BASE_HOOKS.append(_unknown_base_hook)
