"""papermill's engine with a chapter's kernel on local (ipc) sockets in a temporary folder, not on TCP (where ipykernel
warns on every chapter that the traffic is unencrypted): the book's build and ``make chapter``
(``papermill --engine crossprofile``, registered in pyproject.toml)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from papermill.engines import NBClientEngine
from traitlets.config import Config


class LocalSocketEngine(NBClientEngine):
    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
        with tempfile.TemporaryDirectory() as tmp:
            kwargs.setdefault("config", Config({"KernelManager": {"transport": "ipc", "ip": str(Path(tmp) / "kernel")}}))
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
