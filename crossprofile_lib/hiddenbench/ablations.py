"""The natural discussion's prompt ablations, by name: each changes only the round-message prompt (everything else,
seeded orders included, is shared). Prompt files live in ``prompts/natural/``, versioned (``_v1``).
"""

from __future__ import annotations

from dataclasses import dataclass

DIR = "natural"


@dataclass(frozen=True)
class Ablation:
    name: str
    message_prompt: str          # file under prompts/
    shows_initial_vote: bool
    summary: str


ABLATIONS: dict[str, Ablation] = {a.name: a for a in (
    Ablation("baseline", f"{DIR}/message_baseline_v1.txt", True,
             "share what you know and say which option you favour"),
    Ablation("evidence-first", f"{DIR}/message_evidence_first_v1.txt", True,
             "state your facts in their original wording before any opinion"),
    Ablation("unique-first", f"{DIR}/message_unique_first_v1.txt", True,
             "begin with information nobody has mentioned yet"),
    Ablation("no-vote-reminder", f"{DIR}/message_no_vote_reminder_v1.txt", False,
             "baseline without the reminder of one's initial vote"),
)}
DEFAULT_ABLATIONS = tuple(ABLATIONS)

#: The other prompt files of the natural protocol (shared by all ablations).
PROMPT_FILES = {
    "system": f"{DIR}/system_v1.txt",
    "vote_initial": f"{DIR}/vote_initial_v1.txt",
    "vote_final": f"{DIR}/vote_final_v1.txt",
    "vote_retry": f"{DIR}/vote_retry_v1.txt",
    "extract": f"{DIR}/extract_claims_v1.txt",
    "extract_retry": f"{DIR}/extract_retry_v1.txt",
    "confirm_duplicate": f"{DIR}/confirm_duplicate_v1.txt",
}


def get_ablation(name: str) -> Ablation:
    if name not in ABLATIONS:
        raise ValueError(f"unknown ablation '{name}' (known: {', '.join(ABLATIONS)})")
    return ABLATIONS[name]


def parse_ablations(names) -> tuple[Ablation, ...]:
    """Ablations from a list or a comma-separated string (``all``: every one)."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not names or list(names) == ["all"]:
        names = DEFAULT_ABLATIONS
    return tuple(get_ablation(n) for n in names)


def prompt_files() -> list[str]:
    """Every prompt file the natural protocol reads (hashed in the run header)."""
    return sorted(set(PROMPT_FILES.values()) | {a.message_prompt for a in ABLATIONS.values()})
