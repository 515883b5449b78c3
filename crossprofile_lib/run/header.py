"""The run header: what ``run.json`` and ``hiddenbench_run.json`` record about how a run was made.

:func:`run_header` builds the shared fields: the configuration (backend options redacted by
:func:`crossprofile_lib.safety.redact.redact_options`), backend, model, decision mode, tokenizer, package version, git
commit and the policy files used (path, SHA-256, policies). :func:`stamp` adds the seconds and the time written;
each writer adds its own fields.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict
from pathlib import Path

from crossprofile_lib import __version__
from crossprofile_lib.policies.plugins import sources as plugin_sources
from crossprofile_lib.run.config import protocol_free
from crossprofile_lib.run.results import git_commit
from crossprofile_lib.safety.redact import redact_options
from crossprofile_lib.task.templates import parse_template, template_paths


def config_record(cfg) -> dict:
    """A configuration dataclass (:class:`~crossprofile_lib.run.config.RunConfig`,
    :class:`~crossprofile_lib.hiddenbench.config.HBConfig`) as the header records it: its fields, backend
    options redacted."""
    d = protocol_free(asdict(cfg))
    if "backend_options" in d:
        d["backend_options"] = redact_options(d["backend_options"])
    return d


def run_header(cfg, backend) -> dict:
    """The fields every run header has (see the module doc)."""
    header = {
        "config": config_record(cfg),
        "backend": backend.name,
        "model": backend.model,
        "decision_mode": backend.decision_mode,
        "tokenizer": backend.tokenizer.name,
        "tokenizer_source": backend.tokenizer_source,
        "package_version": __version__,
        "git_commit": git_commit(Path(__file__).resolve().parent),
        # model backends: the request fields sent (sampling), the served model, the concurrency reached
        **(backend.record() if hasattr(backend, "record") else {}),
    }
    used = plugin_sources(getattr(cfg, "policies", ()) or ())
    if used:  # the policy files of your own behind this run: path and SHA-256 (crossprofile_lib.policies.plugins)
        header["policy_files"] = used
    return header


def template_hashes(paths) -> dict[str, str]:
    """Template id -> sha256 of its file's bytes, for every template file under ``paths`` (``run.json``'s
    ``templates_sha256``: the book refuses to import a run whose templates differ from the files here)."""
    out = {}
    for p in template_paths(paths):
        out[str(parse_template(p).id)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def stamp(header: dict, t0: float) -> dict:
    """``header`` with ``seconds`` since ``t0`` (:func:`time.perf_counter`) and ``created`` (UTC) set."""
    header.update(seconds=round(time.perf_counter() - t0, 3),
                  created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return header
