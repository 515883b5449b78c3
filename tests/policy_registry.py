"""The policy registry kept as it was around a test (or a module of tests): plug-ins a test registers
(``crossprofile_lib.policies.plugins``) are removed afterwards, so every test starts from the same
registry. One helper for every test file that loads policy files."""

from __future__ import annotations

import contextlib

from crossprofile_lib.policies import plugins


@contextlib.contextmanager
def policy_registry_kept():
    """Snapshot ``REGISTRY``, ``PLUGINS`` and the loaded-file table; restore them on exit."""
    tables = (plugins.REGISTRY, plugins.PLUGINS, plugins._LOADED)
    before = tuple(dict(d) for d in tables)
    try:
        yield
    finally:
        for d, saved in zip(tables, before):
            d.clear()
            d.update(saved)
