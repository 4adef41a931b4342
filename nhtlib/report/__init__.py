"""The report: claims and their verdict rules (`verdicts`, `claims`), NHT's predictions P1–P6 (`predictions`), whether
the verdicts survive another block of seeds (`stability`), tables for people (`tables`), figures (`plots`), what made
a page (`provenance`, `manifest`) and the numbers given away (`exports`). It reads analysed tables; it never trains,
and reads the run cache only to give the runs' tables away (`exports`)."""
from nhtlib.paths import lazy_attributes

__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{name}" for name in (
    "verdicts", "claims", "predictions", "tables", "plots", "provenance", "manifest", "exports",
    "stability")})
