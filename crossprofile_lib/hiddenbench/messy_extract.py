"""The messy protocol's ``model`` extraction level: :func:`model_extractor` turns a chat backend into the
``extractor`` of :func:`crossprofile_lib.task.extraction.extract`, sending each utterance to the natural protocol's
extraction prompt (one batch per discussion), parsing with :func:`~crossprofile_lib.hiddenbench.claims.parse_claims`
(no retry) and merging with :func:`~crossprofile_lib.hiddenbench.claims.merge_claims`. The prompt sees only the speaker
and the utterance, never a fact id.
"""

from __future__ import annotations

from typing import Sequence

from crossprofile_lib.backends.base import ChatRequest
from crossprofile_lib.hiddenbench.ablations import PROMPT_FILES
from crossprofile_lib.hiddenbench.claims import RawClaim, merge_claims, parse_claims, sentence_claims
from crossprofile_lib.hiddenbench.natural import extract_max_tokens
from crossprofile_lib.prompts import render
from crossprofile_lib.task.discussion import Utterance


def extract_request(u: Utterance) -> ChatRequest:
    p = render(PROMPT_FILES["extract"], speaker=u.speaker, message=u.text)
    return ChatRequest((p.message(),), max_tokens=extract_max_tokens(u.text), purpose="messy-extract",
                       prompt_file=PROMPT_FILES["extract"])


def model_extractor(backend):
    """``(utterances) -> groups of utterance positions`` by ``backend``'s chat calls (see the module doc)."""
    def extractor(utterances: Sequence[Utterance]) -> list[list[int]]:
        utt = list(utterances)
        results = backend.chat([extract_request(u) for u in utt]) if utt else []
        raw = []
        for u, res in zip(utt, results):
            claims, ok = parse_claims("" if res.error else res.text)
            if not ok:
                claims = sentence_claims(u.text)
            raw += [RawClaim(u.speaker, u.position, c) for c in claims]
        order = list(dict.fromkeys(u.speaker for u in utt))
        m = merge_claims(raw, order)
        groups: dict[int, list[int]] = {}
        for r, c in zip(raw, m.cluster):
            groups.setdefault(c, [])
            if r.message_index not in groups[c]:
                groups[c].append(r.message_index)
        # an utterance whose claims fell in several clusters belongs to the first; one with none is its own claim
        seen: set[int] = set()
        out = []
        for c in sorted(groups):
            g = [i for i in groups[c] if i not in seen]
            seen.update(g)
            if g:
                out.append(g)
        out += [[u.position] for u in utt if u.position not in seen]
        return out
    return extractor
