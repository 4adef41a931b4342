"""The report: claims and their verdict rules (`verdicts`, `claims`), NHT's predictions P1–P6 (`predictions`), tables
for people (`tables`), figures (`plots`) and what made a page (`provenance`).
It reads analysed tables; it never trains and never touches the run cache."""
from nhtlib.paths import lazy_attributes

__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{name}" for name in (
    "verdicts", "claims", "predictions", "tables", "plots", "provenance")})
