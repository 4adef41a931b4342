"""Plotting helpers on seaborn, with one book-wide theme.

Every figure in the book: labelled axes with units, a legend title, mean line with a shaded band of +-1 standard
deviation across seeds (the `errorbar=("sd", 1)` of seaborn).
"""
from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use("Agg") if matplotlib.get_backend().lower() in ("", "agg") else None
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

PALETTE = "viridis"
REGIME_COLOURS = {"weak": "#4c72b0", "intermediate": "#55a868", "strong": "#c44e52"}


def set_theme() -> None:
    """The book's theme: seaborn 'whitegrid', readable fonts, compact figures."""
    sns.set_theme(context="notebook", style="whitegrid", palette="deep",
                  rc={"figure.figsize": (7.0, 4.0), "figure.dpi": 100, "axes.titleweight": "bold",
                      "legend.frameon": False, "savefig.bbox": "tight"})


def lines_with_band(data: pd.DataFrame, x: str, y: str, hue: str | None = None, *, ax=None,
                    xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
                    logx: bool = False, logy: bool = False, palette=PALETTE, legend_title: str | None = None,
                    legend: bool = True, style: str | None = None):
    """Mean of `y` over seeds against `x`, one line per `hue` value, band = +-1 sd across seeds.

    A numeric hue (lambda, alpha, ...) is shown as ordered categories with evenly spaced colours, so log-spaced
    values stay distinguishable; the legend sits outside the axes on the right.
    """
    ax = ax or plt.gca()
    order = None
    if hue is not None:
        data = data.copy()
        values = sorted(data[hue].unique())
        if pd.api.types.is_numeric_dtype(data[hue]):
            labels = {v: f"{v:g}" for v in values}
            data[hue] = data[hue].map(labels)
            order = [labels[v] for v in values]
        else:
            order = values
    colours = sns.color_palette(palette, len(order)) if order and len(order) > 1 else None
    sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=order, style=style, errorbar=("sd", 1), ax=ax,
                 palette=colours, legend="full" if (hue and legend) else False)
    if logx:
        ax.set_xscale("symlog", linthresh=1) if (data[x] <= 0).any() else ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    if hue and legend and ax.get_legend() is not None:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), title=legend_title or hue)
    return ax


def trajectory_panels(data: pd.DataFrame, x: str, panels: Sequence[tuple[str, str, bool]], *, hue: str,
                      legend_title: str, xlabel: str, title: str = "", width: float = 4.6, height: float = 3.4):
    """The book's row of trajectory panels (norm, accuracy, shortcut reliance ... over training): one panel per
    (column, y label, log y) of `panels`, mean ± sd over seeds per `hue` value, one shared legend at the right."""
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), height), constrained_layout=True)
    axes = np.atleast_1d(axes)
    for i, (ax, (column, ylabel, logy)) in enumerate(zip(axes, panels)):
        lines_with_band(data, x, column, hue=hue, ax=ax, logy=logy, xlabel=xlabel, ylabel=ylabel,
                        legend=i == len(panels) - 1, legend_title=legend_title)
    if title:
        fig.suptitle(title)
    return fig, axes


def mark_steps(axes, steps: dict, *, colour: str = "grey") -> None:
    """Dashed vertical lines at named steps (e.g. {"T_mem": 800, "T_grok": 1800}) on every axis of `axes`, labelled
    with name and value in each legend; NaN steps (never reached) are left out."""
    styles = (":", "--", "-.")
    for ax in np.atleast_1d(axes):
        for i, (name, step) in enumerate(steps.items()):
            if step is not None and np.isfinite(step):
                ax.axvline(step, color=colour, ls=styles[i % len(styles)], lw=1.2, label=f"{name} = {step:,.0f}")
        ax.legend(loc="best", fontsize=8)


def panel_grid(n: int, ncols: int = 3, width: float = 4.2, height: float = 3.2, sharex: bool = True):
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), sharex=sharex, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def scatter_with_fit(x: Sequence[float], y: Sequence[float], fit=None, *, hue=None, ax=None, xlabel: str = "",
                     ylabel: str = "", title: str | None = None, identity: bool = True, legend_title=None,
                     logx: bool = False, logy: bool = False):
    """Scatter of measured vs predicted with the fitted line (a LinearFit) and the y = x line."""
    import numpy as np

    ax = ax or plt.gca()
    sns.scatterplot(x=np.asarray(x), y=np.asarray(y), hue=hue, ax=ax, palette=PALETTE if hue is not None else None,
                    s=40)
    xs = np.linspace(np.nanmin(x), np.nanmax(x), 50)
    if fit is not None:
        ax.plot(xs, fit.slope * xs + fit.intercept, color="black", lw=1.5,
                label=f"fit: slope {fit.slope:.2f}, R² {fit.r2:.2f}")
    if identity:
        ax.plot(xs, xs, color="grey", ls="--", lw=1, label="y = x")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(title=legend_title)
    return ax


def regime_map(summary: pd.DataFrame, x: str, y: str, regime: str = "regime", *, ax=None, xlabel=None,
               ylabel=None, title=None):
    """Heat map of the (majority) regime on a grid of two parameters (e.g. weight decay x norm ratio)."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from .regimes import REGIMES, majority_regime

    ax = ax or plt.gca()
    cell = summary.groupby([y, x])[regime].agg(majority_regime).unstack(x)
    codes = cell.apply(lambda col: col.map({r: i for i, r in enumerate(REGIMES)})).to_numpy(float)
    cmap = ListedColormap([REGIME_COLOURS[r] for r in REGIMES])
    ax.imshow(codes, cmap=cmap, vmin=-0.5, vmax=len(REGIMES) - 0.5, aspect="auto", origin="lower")
    ax.set_xticks(range(cell.shape[1]), [f"{v:g}" for v in cell.columns])
    ax.set_yticks(range(cell.shape[0]), [f"{v:g}" for v in cell.index])
    for (i, j), value in np.ndenumerate(cell.to_numpy()):
        ax.text(j, i, value, ha="center", va="center", fontsize=8, color="white")
    ax.grid(False)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    ax.legend(handles=[Patch(color=REGIME_COLOURS[r], label=r) for r in REGIMES], bbox_to_anchor=(1.02, 1),
              loc="upper left", title="regime")
    return ax


def image_rows(rows: dict, *, title: str = "", col_titles: Sequence[str] | None = None, size: float = 1.3):
    """One row of images per entry of `rows` ({row label: images (N, 3, H, W) tensor, values in [0, 1]}), without
    ticks, the label on the left of each row, optional column titles on the first row. Returns the figure."""
    n_cols = max(len(images) for images in rows.values())
    fig, axes = plt.subplots(len(rows), n_cols, figsize=(size * n_cols + 1.0, 1.4 * len(rows)), squeeze=False)
    for row_axes, (label, images) in zip(axes, rows.items()):
        for ax in row_axes:
            ax.set_xticks([]), ax.set_yticks([])
            ax.grid(False)
        for ax, image in zip(row_axes, images):
            ax.imshow(image.clamp(0, 1).permute(1, 2, 0).cpu().numpy())
        row_axes[0].set_ylabel(label, fontsize=8)
    for ax, text in zip(axes[0], col_titles or []):
        ax.set_title(text, fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig


def values_by_category(points: pd.DataFrame, x: str, y: str, order: Sequence[str], *, reference=None, ax=None,
                       xlabel: str = "", ylabel: str = "", title: str | None = None, ylim=None,
                       hlines: Sequence[float] = (), empty_text: str = "not run\nat this scale",
                       labels: tuple[str, str, str] = ("one run (ours)", "mean ± s.e.m. (ours)", "paper")):
    """One column per category of `order` (e.g. the S spectrum's domains): every value of `y` in `points` as a
    jittered dot, their mean ± standard error, and beside them the reference value with its range (`reference`:
    columns x, value, low, high; e.g. the paper's); a category without values says `empty_text`; dotted lines at
    `hlines`. labels: the legend's names for the dots, the mean and the reference."""
    ax = ax or plt.gca()
    for i, category in enumerate(order):
        v = points.loc[points[x] == category, y].dropna().to_numpy(float)
        if not len(v):
            ax.text(i, 0.05, empty_text, ha="center", fontsize=8, color="grey")
            continue
        jitter = np.random.default_rng(i).uniform(-0.12, 0.12, len(v))
        ax.scatter(i - 0.1 + jitter, v, s=14, alpha=0.45, color="C0", label=labels[0])
        sem = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
        ax.errorbar(i - 0.1, v.mean(), yerr=sem, fmt="o", ms=8, color="C0", capsize=4, label=labels[1])
    if reference is not None:
        for row in reference[reference[x].isin(order)].itertuples():
            i = list(order).index(getattr(row, x))
            ax.errorbar(i + 0.2, row.value, yerr=[[row.value - row.low], [row.high - row.value]], fmt="D", ms=7,
                        color="C3", lw=3, label=labels[2])
    for level in hlines:
        ax.axhline(level, color="grey", ls=":", lw=1)
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xticks(range(len(order)), [str(c).replace(" (", "\n(") for c in order])
    ax.set(xlabel=xlabel, ylabel=ylabel, ylim=ylim)
    if title:
        ax.set_title(title)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))  # one legend entry per label
    ax.legend(handles.values(), handles.keys(), loc="lower left", fontsize=8)
    return ax


VERDICT_COLOURS = {"reproduced": "#4c9a4c", "partly": "#e0b040", "not reproduced": "#c9504a",
                   "inconclusive": "#6f8fbf", "not testable here": "#aaaaaa"}


def verdict_bars(counts: pd.DataFrame, *, ax=None, title: str = "", xlabel: str = "claims"):
    """Horizontal stacked bars of verdict counts: one bar per row of `counts` (e.g. per chapter or per source, as
    `nht.claims.verdict_counts` gives them; a 'total' row is left out), one colour per verdict."""
    counts = counts.drop(index="total", errors="ignore")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.45 * len(counts) + 1.2))
    left = np.zeros(len(counts))
    for verdict in counts.columns:
        values = counts[verdict].to_numpy(float)
        ax.barh(counts.index.astype(str), values, left=left, color=VERDICT_COLOURS.get(verdict, "#dddddd"),
                label=verdict)
        left += values
    ax.invert_yaxis()
    ax.set(xlabel=xlabel, title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax
