"""Where every resource is: bundled data (``crossprofile_lib/resources/`` via :mod:`importlib.resources`, so a wheel
works anywhere), the user's folders (:func:`cache_dir`, :func:`tokenizers_dir`), the checkout (:func:`checkout_root`).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import platformdirs

PACKAGE = "crossprofile_lib"
CACHE_ENV = "CROSSPROFILE_CACHE"
PROMPTS_ENV = "CROSSPROFILE_PROMPTS"
ROOT_ENV = "CROSSPROFILE_ROOT"
TOKENIZERS_ENV = "CROSSPROFILE_TOKENIZERS"
LEGACY_CACHE = ".crossprofile_cache"


def file_sha256(path: Path | str) -> str:
    """The SHA-256 (hex) of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def package_dir() -> Path:
    """The installed package's folder."""
    return Path(str(resources.files(PACKAGE)))


@lru_cache(maxsize=1)
def _resources() -> Path:
    return Path(str(resources.files(PACKAGE).joinpath("resources")))


def resource(*parts: str) -> Path:
    """A file or folder bundled under ``crossprofile_lib/resources/`` (located once per process: every prompt
    rendered asks for it)."""
    return _resources().joinpath(*parts)


def templates_dir() -> Path:
    return resource("templates")


def formal_templates_dir() -> Path:
    return resource("templates", "formal")


def dev_templates_dir() -> Path:
    return resource("templates", "dev")


def prompts_dir() -> Path:
    """The prompt files (``$CROSSPROFILE_PROMPTS`` moves them)."""
    env = os.environ.get(PROMPTS_ENV)
    return Path(env) if env else resource("prompts")


def prereg_path() -> Path:
    return resource("prereg.yaml")


def paper_figures_path() -> Path:
    return resource("paper_figures.yaml")


def hiddenbench_fixture_path() -> Path:
    """The project's own HiddenBench-format fixture (6 tasks written for this suite, not HiddenBench data)."""
    return resource("hiddenbench_fixture.json")


def resolve_template_path(p: str | os.PathLike) -> Path:
    """``p`` as given when it exists; a ``templates[/...]`` path that does not exist here means the bundled one."""
    path = Path(p).expanduser()
    if path.exists() or path.is_absolute() or path.parts[:1] != ("templates",):
        return path
    bundled = templates_dir().joinpath(*path.parts[1:])
    return bundled if bundled.exists() else path


def cache_dir() -> Path:
    """The model-call cache folder: ``$CROSSPROFILE_CACHE``, else ``./.crossprofile_cache`` if it exists
    (where earlier versions kept it), else the user cache folder (platformdirs)."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env).expanduser()
    legacy = Path.cwd() / LEGACY_CACHE
    if legacy.is_dir():
        return legacy
    return Path(platformdirs.user_cache_dir("crossprofile", appauthor=False))


def tokenizers_dir() -> Path:
    """The named tokenizers' files: ``$CROSSPROFILE_TOKENIZERS``, else the user data folder (platformdirs)."""
    if env := os.environ.get(TOKENIZERS_ENV):
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("crossprofile", appauthor=False)) / "tokenizers"


def checkout_root() -> Path | None:
    """The repository the package runs from (``$CROSSPROFILE_ROOT``, else the folder above the package
    when it holds ``notebooks/`` and ``_config.yml``), or None for an installed package."""
    if env := os.environ.get(ROOT_ENV):
        return Path(env)
    up = package_dir().resolve().parent
    return up if (up / "notebooks").is_dir() and (up / "_config.yml").is_file() else None


def book_root() -> Path:
    """The checkout a book is built from; a clear error for an installed package."""
    root = checkout_root()
    if root is None:
        raise FileNotFoundError("the book is built from a checkout of the repository (notebooks/, _config.yml); "
                                f"this package is installed at {package_dir()} without them "
                                f"(rule: clone the repository, or set {ROOT_ENV} to a checkout)")
    return root
