"""Tables for people: the one place where a chapter's table gets human column names, fixed number formats and a
single missing-value marker before it is shown.

`for_people(df, names, formats)` returns a pandas ``Styler`` (rendered as an HTML table by the book): the columns
renamed by `NAMES` (the book's shared dictionary of recurring columns: ``lam`` → λ, ``T_struct`` → T_struct (steps),
``decay_pct:<layer>`` → <layer> decay % …) and by `names`, every number formatted with one format per column
(`formats`: a format spec such as ",.1f", "sig3" for three significant digits at any magnitude, or a callable;
otherwise one chosen from the column's magnitude: no decimals from 100 on, one from 10, two from 1, three below),
integers without decimals, NaN, None and empty strings shown as `MISSING` ("—"), U+2212 for minus signs.
The table's data stay reachable as ``styler.data`` (with the human names). Headers and cells are plain Unicode
text: no TeX (HTML tables are not typeset).
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import pandas as pd

MISSING = "—"  # the one missing-value marker of every table

# Recurring column (and index) names of the chapters' tables -> what a reader sees
NAMES: dict[str, str] = {
    "lam": "λ", "weight_decay": "λ", "alpha": "α", "rho": "ρ", "seed": "seed", "seeds": "seeds", "lr": "learning rate",
    "regime": "regime", "model": "model", "group": "group", "layer": "layer", "split": "split",
    "T_struct": "T_struct (steps)", "T_fit": "T_fit (steps)", "T_pred": "T_pred (steps)", "delay": "delay (steps)",
    "T_mem": "T_mem (steps)", "T_grok": "T_grok (steps)", "T_end": "last step",
    "V_fit": "V_sc = ‖θ‖² at T_fit", "V_final": "final ‖θ‖²", "V_peak": "peak ‖θ‖²", "V_mem": "V_mem", "V_post": "V_post",
    "decay_pct": "decay % from peak", "peak_step": "peak step", "contraction_step": "T_tr (steps)",
    "c_fit": "c = γ/(ηλ)", "final_test_acc": "final test acc", "final_train_acc": "final train acc",
    "dlr": "D_LR", "dlr_centred": "D_LR (centred span)", "dlr_null": "D_LR null value", "test_acc": "test acc",
    "train_acc": "train acc", "test_clean_acc": "clean test acc", "s_init": "S_init", "nc1": "NC1",
    "nc1_bounded": "NC1 (Tr Σ_W / Tr Σ_T)", "theta_sq": "‖θ‖²", "theta_dist_rel": "‖θ − θ₀‖² / ‖θ₀‖²",
    "feature_dim": "p (features)", "count": "images", "share": "share",
}
# Per-layer columns "<quantity>:<layer>" -> a name with the layer's short name in it
PER_LAYER: dict[str, str] = {"decay_pct": "{} decay %", "peak_step": "{} peak step", "contraction_step": "{} T_tr",
                             "norm_sq": "‖θ‖² ({})"}


def human_name(column, names: Mapping | None = None) -> str:
    """What a reader sees for `column`: `names` first, then `NAMES`, then the per-layer pattern of `PER_LAYER`
    (the layer's last dotted part, e.g. ``decay_pct:layers.output`` → "output decay %"), else the name itself."""
    if names and column in names:
        return names[column]
    if column in NAMES:
        return NAMES[column]
    if isinstance(column, str) and ":" in column:
        quantity, layer = column.split(":", 1)
        if quantity in PER_LAYER:
            return PER_LAYER[quantity].format(layer.split(".")[-1])
    return column if isinstance(column, str) else index_value(column)


def auto_format(values) -> str:
    """The format spec of a numeric column: integers without decimals; else by the median magnitude of its finite
    values: no decimals from 100 on, one from 10, two from 1, three below."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float)
    v = v[np.isfinite(v)]
    if not len(v) or np.all(v == np.round(v)):
        return ",.0f"
    m = float(np.median(np.abs(v)))
    return ",.0f" if m >= 100 else ",.1f" if m >= 10 else ",.2f" if m >= 1 else ",.3f"


def number(value, spec: str = ".2f") -> str:
    """One number as the tables print it (`spec`: a format spec such as ",.0f"); `MISSING` for NaN and None."""
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, float, np.integer, np.floating)):
        text = format(value, spec)
        return MISSING if text.lower() in ("nan", "-nan") else text.replace("-", "−")
    text = str(value)
    return MISSING if text.strip() in ("", "nan", "NaN", "None") else text


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def significant(value, digits: int = 3) -> str:
    """A number of any magnitude with `digits` significant digits, without an exponent from 0.001 to 10⁶
    (2,260 · 19.1 · 0.401), else as m × 10ⁿ (1.2 × 10⁻⁴); `MISSING` for NaN."""
    if value is None or not np.isfinite(value):
        return MISSING
    if value == 0:
        return "0"
    exponent = int(np.floor(np.log10(abs(value))))
    if -3 <= exponent < 6:
        decimals = max(digits - 1 - exponent, 0)
        return f"{value:,.{decimals}f}".replace("-", "−")
    mantissa = f"{value / 10 ** exponent:.{digits - 1}f}".rstrip("0").rstrip(".")
    return f"{mantissa} × 10{str(exponent).translate(SUPERSCRIPT)}".replace("-", "−")


def mean_sd(mean, sd, spec: str = ".2f") -> str:
    """'mean ± sd' with one format; the mean alone when sd is NaN (a single seed), `MISSING` when the mean is."""
    if mean is None or not np.isfinite(mean):
        return MISSING
    if sd is None or not np.isfinite(sd):
        return number(mean, spec)
    return f"{number(mean, spec)} ± {number(sd, spec)}"


def _formatter(spec) -> Callable[[object], str]:
    """A format spec (",.0f"; "sig3": `significant` with 3 digits) or a callable -> a cell formatter."""
    if callable(spec):
        return spec
    if spec.startswith("sig"):
        digits = int(spec[3:] or 3)
        return lambda v: significant(v, digits) if isinstance(v, (int, float, np.integer, np.floating)) else number(v)
    return lambda v: number(v, spec)


def index_value(value) -> str:
    """An index label as the tables print it: numbers without trailing zeros (0.01, 3, 300), U+2212 minus."""
    if isinstance(value, (float, np.floating)):
        return MISSING if not np.isfinite(value) else f"{value:g}".replace("-", "−")
    return str(value)


def for_people(df: pd.DataFrame, names: Mapping | None = None, formats: Mapping | None = None, *,
               hide_index: bool = False):
    """The table `df` as a reader sees it: a pandas ``Styler`` with human column and index names (`names`, then
    `NAMES` / `PER_LAYER`), one number format per column (`formats`: {column: format spec or callable}, keyed by
    the original column names; others from `auto_format`), `MISSING` for every missing value, numeric index labels
    without trailing zeros, and the index hidden when `hide_index`. The Styler's ``data`` holds the renamed frame."""
    names, formats = dict(names or {}), dict(formats or {})
    frame = df.copy()
    specs: dict = {}
    for column in frame.columns:
        values = frame[column]
        if column in formats:
            specs[column] = _formatter(formats[column])
        elif pd.api.types.is_bool_dtype(values):
            specs[column] = _formatter(".0f")
        elif pd.api.types.is_numeric_dtype(values):
            specs[column] = _formatter(auto_format(values))
        else:
            specs[column] = _formatter(".2f")
    renamed = {c: human_name(c, names) for c in frame.columns}
    frame.columns = [renamed[c] for c in frame.columns]
    frame = frame.rename_axis(index=[human_name(n, names) if n is not None else None for n in frame.index.names])
    if isinstance(frame.columns, pd.MultiIndex) or frame.columns.has_duplicates:
        raise ValueError(f"for_people needs distinct flat column names, got {list(frame.columns)}")
    # escape="html": a cell or label from a results file (a verdict, a claim id) is shown as text, never as markup
    styler = frame.style.format({renamed[c]: f for c, f in specs.items()}, na_rep=MISSING, escape="html")
    styler = styler.format_index(index_value, axis=0, escape="html").format_index(axis=1, escape="html")
    styler = styler.set_table_attributes('class="dataframe"')
    return styler.hide(axis="index") if hide_index else styler
