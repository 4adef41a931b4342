"""Claims: what each chapter tests, the paper's value, ours and a verdict.

A chapter records its claims with `Claims.add(...)`, then `claims.save()` writes them as
results/<scale>/<chapter>/claims.csv (next to the executed chapter; `paths.chapter_dir`, i.e. the runner's staging
folder while `nhtlib.chapters` runs the chapter) and `claims.table()` renders the chapter's
closing table. `scoreboard()` gathers every chapter's claims for the book's Scoreboard page.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from .config import ConfigError, check_choice
from .paths import atomic_write_bytes, chapter_dir, chapter_files

VERDICTS = ("reproduced", "partly", "not reproduced", "not testable here")
COLUMNS = ["chapter", "id", "statement", "paper", "ours", "verdict", "scale"]


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    paper: str
    ours: str
    verdict: str

    def __post_init__(self) -> None:
        check_choice("verdict", self.verdict, VERDICTS)
        for name in ("id", "statement", "paper", "ours"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ConfigError(f"claim {name}={getattr(self, name)!r} must be a non-empty string")


class Claims:
    """The claims of one chapter at one scale."""

    def __init__(self, chapter: str, scale: str):
        self.chapter, self.scale = chapter, scale
        self._claims: list[Claim] = []

    def add(self, id: str, statement: str, paper: str, ours: str, verdict: str) -> None:  # noqa: A002
        """Record one claim; verdict is one of VERDICTS."""
        if any(c.id == id for c in self._claims):
            raise ConfigError(f"claim id {id!r} is recorded twice in chapter {self.chapter!r}")
        self._claims.append(Claim(id, statement, paper, ours, verdict))

    def frame(self) -> pd.DataFrame:
        rows = [{"chapter": self.chapter, **asdict(c), "scale": self.scale} for c in self._claims]
        return pd.DataFrame(rows, columns=COLUMNS)

    @property
    def path(self) -> Path:
        return chapter_dir(self.chapter, self.scale) / "claims.csv"

    def save(self) -> Path:
        atomic_write_bytes(self.path, self.frame().to_csv(index=False).encode())
        return self.path

    def table(self):
        """The closing table of the chapter (a pandas Styler, rendered as HTML by the book)."""
        return style_claims(self.frame().drop(columns=["chapter", "scale"]))


def style_claims(frame: pd.DataFrame):
    colours = {"reproduced": "#d8f0d8", "partly": "#fff1c9", "not reproduced": "#f8d7d7",
               "not testable here": "#e6e6e6"}

    def colour(v: str) -> str:
        return f"background-color: {colours.get(v, 'white')}"

    return (frame.style.hide(axis="index").map(colour, subset=["verdict"])
            .set_properties(**{"text-align": "left", "white-space": "normal"}))


def load_claims(scale: str) -> pd.DataFrame:
    """Every chapter's claims.csv at this scale, in chapter order: the book's runs only (results/<scale>/<chapter>/;
    runs with another seed, in results/<scale>/seed-<s>/, are left out). See paths.chapter_files."""
    files = chapter_files(scale, "claims.csv")
    frames = [pd.read_csv(f, dtype=str, keep_default_na=False) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def scoreboard(scale: str, chapters: list[str] | None = None) -> pd.DataFrame:
    """All claims at this scale; chapters listed in `chapters` but never run appear as one 'not run' row."""
    frame = load_claims(scale)
    for chapter in chapters or []:
        if chapter not in set(frame["chapter"]):
            row = {"chapter": chapter, "id": "-", "statement": f"chapter not executed at scale {scale!r}",
                   "paper": "", "ours": "", "verdict": "not testable here", "scale": scale}
            frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
    return frame.sort_values(["chapter"], kind="stable").reset_index(drop=True)


def verdict_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Chapters x verdicts count table."""
    counts = frame.groupby(["chapter", "verdict"]).size().unstack(fill_value=0)
    return counts.reindex(columns=[v for v in VERDICTS if v in counts.columns])
