"""Binder/Colab launch buttons from ONE setting: off in ``_config.yml``; ``REPOSITORY_URL`` turns them on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import yaml

BINDER = "https://mybinder.org"
COLAB = "https://colab.research.google.com"
URL = re.compile(r"^https://[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/?$")


class LaunchConfigError(ValueError):
    pass


def check_url(url: str) -> str:
    """``url`` (stripped) when it is a repository URL; else :class:`LaunchConfigError` naming the rule."""
    url = url.strip()
    if not URL.match(url) or "/OWNER/" in url:
        raise LaunchConfigError(f"REPOSITORY_URL: {url!r} is not a repository URL like "
                                "https://github.com/OWNER/NAME (the launch buttons would be dead links)")
    return url


def configured(config: Path, url: str, out: Path) -> Path:
    """Write ``config`` with the repository ``url`` and Binder/Colab on into ``out``; return ``out``."""
    url = check_url(url)
    doc = yaml.safe_load(Path(config).read_text())
    doc["repository"] = dict(doc.get("repository") or {}, url=url.rstrip("/"))
    doc["launch_buttons"] = dict(doc.get("launch_buttons") or {}, binderhub_url=BINDER, colab_url=COLAB)
    doc.setdefault("html", {})["use_repository_button"] = True
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def config_args(root: Path, env: dict) -> list[str]:
    """Extra ``jupyter-book build`` arguments: ``--config FILE`` when REPOSITORY_URL is set, else none."""
    url: Optional[str] = (env.get("REPOSITORY_URL") or "").strip()
    if not url:
        return []
    return ["--config", str(configured(root / "_config.yml", url, root / "_build" / "_config.launch.yml"))]
