"""Plotting helpers on seaborn, with one book-wide theme sized for the page.

Every figure in the book: labelled axes with units, a legend title, mean line with a shaded band of +-1 standard
deviation across seeds (the `errorbar=("sd", 1)` of seaborn). Figures are drawn for the book's content column:
at most `PAGE_WIDTH_IN` inches wide at `DPI` (so that a browser shows them at their natural size, never shrunk),
fonts of at least `SMALL_FONT_PT` points, legends outside the axes (at the right of one axis, or one legend for the
whole figure in an empty grid cell or below the panels), and rows of three or more panels laid out as a grid of
two columns. The paper's value of a plotted quantity is drawn beside ours as a dashed line or point labelled
"paper" (`paper` arguments, `reference_lines`, `reference_points`), and a null value that the text reads a measure
against (e.g. the D_LR of structureless features) as a dotted line (`null` arguments).
"""
from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg") if matplotlib.get_backend().lower() in ("", "agg") else None
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from nhtlib.paths import atomic_write_bytes, chapter_dir  # noqa: E402

PALETTE = "viridis"
REGIME_COLOURS = {"weak": "#4c72b0", "intermediate": "#55a868", "strong": "#c44e52"}
REGIME_LETTERS = {"weak": "W", "intermediate": "I", "strong": "S", "diverged": "D"}  # cell labels of `regime_map`

PAGE_WIDTH_IN = 7.5  # the book's content column (≈ 730–800 px at 1,400 px) at DPI: a figure is at most this wide
DPI = 100  # matplotlib's inline PNGs: natural width in px = inches × DPI (≤ 750 px)
PANEL_HEIGHT_IN = 2.7  # one row of panels
FONT_PT = 10  # labels, titles
SMALL_FONT_PT = 9  # ticks, legends, cell labels: the smallest text of any figure
PAPER_STYLE = {"color": "black", "ls": "--", "lw": 1.3}  # the paper's value beside ours
NULL_STYLE = {"ls": ":", "lw": 1.6}  # a null value (in the colour of the line it belongs to, else grey)
FILE_DPI = 150  # the PNG a chapter writes beside its executed notebook (sharper than the page's inline PNG)
FIGURE_FORMATS = ("svg", "png")
FIGURE_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")  # a file name that is also a readable label: lambda-sweep
SVG_HASH_SALT = "nht-book"  # fixed salt of the SVG's element ids: the same figure gives the same bytes


def set_theme() -> None:
    """The book's theme: seaborn 'whitegrid', fonts of 9–11 pt, page-wide figures with constrained layout."""
    sns.set_theme(context="notebook", style="whitegrid", palette="deep",
                  rc={"figure.figsize": (PAGE_WIDTH_IN, 3.4), "figure.dpi": DPI, "savefig.dpi": DPI,
                      "font.size": FONT_PT, "axes.titlesize": FONT_PT, "axes.labelsize": FONT_PT,
                      "xtick.labelsize": SMALL_FONT_PT, "ytick.labelsize": SMALL_FONT_PT,
                      "legend.fontsize": SMALL_FONT_PT, "legend.title_fontsize": SMALL_FONT_PT,
                      "figure.titlesize": FONT_PT + 1, "axes.titleweight": "bold", "legend.frameon": False,
                      "savefig.bbox": "tight", "figure.constrained_layout.use": True})


def subplots(nrows: int = 1, ncols: int = 1, *, height: float | None = None, width: float = PAGE_WIDTH_IN,
             **kwargs):
    """`plt.subplots` at the page's width (`height`: of the whole figure, default `PANEL_HEIGHT_IN` per row + 0.6),
    with constrained layout, so that legends outside the axes stay inside the figure."""
    height = height or PANEL_HEIGHT_IN * nrows + 0.6
    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kwargs)


def _levels(values) -> list:
    return list(values) if isinstance(values, (list, tuple, np.ndarray, pd.Series)) else [values]


def reference_lines(ax, values, *, axis: str = "y", label: str | None = "paper", style: dict | None = None) -> int:
    """Dashed lines at the paper's `values` (a number or a sequence) on `ax`: horizontal (`axis="y"`) or vertical
    ("x"), with one legend entry `label` (None: no entry); NaN values are left out. Returns how many were drawn."""
    style = {**PAPER_STYLE, **(style or {})}
    line = ax.axhline if axis == "y" else ax.axvline
    drawn = 0
    for v in _levels(values):
        if v is not None and np.isfinite(v):
            line(v, label=label if not drawn else None, **style)
            drawn += 1
    return drawn


def reference_points(ax, x, y, *, label: str = "paper", marker: str = "D", colour: str = "black", size: float = 45,
                     **kwargs) -> None:
    """The paper's values as points (x, y: numbers or sequences) with one legend entry `label`."""
    ax.scatter(np.atleast_1d(x), np.atleast_1d(y), marker=marker, s=size, color=colour, label=label, zorder=5,
               **kwargs)


def reference_curve(ax, x, y, *, label: str = "paper", marker: str = "D") -> None:
    """The paper's values along x (e.g. a digitised curve) as a dashed black line with markers, one legend entry."""
    ax.plot(np.asarray(x, dtype=float), np.asarray(y, dtype=float), marker=marker, ms=5, label=label, zorder=4,
            **PAPER_STYLE)


def legend_entries(axes) -> tuple[list, list[str]]:
    """(handles, labels) of every legend and labelled artist on `axes`, one per label, in order of appearance."""
    entries: dict[str, object] = {}
    for ax in np.atleast_1d(axes).flat:
        legend = ax.get_legend()
        if legend is not None:
            for handle, text in zip(legend.legend_handles, legend.texts):
                entries.setdefault(text.get_text(), handle)
        for handle, text in zip(*ax.get_legend_handles_labels()):
            if text and not text.startswith("_"):
                entries.setdefault(text, handle)
    return list(entries.values()), list(entries)


def legend_right(ax, title: str | None = None, **kwargs):
    """One legend for everything labelled on `ax`, outside it on the right (constrained layout makes room)."""
    handles, labels = legend_entries(ax)
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    if not handles:
        return None
    return ax.legend(handles, labels, title=title or None, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                     borderaxespad=0.0, **kwargs)


def shared_legend(fig, axes, *, title: str | None = None, slot=None, ncol: int | None = None):
    """One legend for the whole figure, built from every axis of `axes` (their own legends are removed): in the
    empty grid cell `slot` (an axis, switched off) when given, else below the panels."""
    handles, labels = legend_entries(axes)
    for ax in np.atleast_1d(axes).flat:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if not handles:
        if slot is not None:
            slot.set_axis_off()
        return None
    if slot is not None:
        slot.set_axis_off()
        return slot.legend(handles, labels, title=title or None, loc="center", borderaxespad=0.0)
    ncol = ncol or min(len(labels), 4)
    return fig.legend(handles, labels, title=title or None, loc="outside lower center", ncol=ncol)


def _hue_colours(order: list, palette) -> dict:
    if len(order) == 1:
        return {order[0]: sns.color_palette()[0]}
    return dict(zip(order, sns.color_palette(palette, len(order))))


def _hue_label(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float, np.integer, np.floating)) else str(value)


def lines_with_band(data: pd.DataFrame, x: str, y: str, hue: str | None = None, *, ax=None,
                    xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
                    logx: bool = False, logy: bool = False, palette=PALETTE, legend_title: str | None = None,
                    legend: bool = True, style: str | None = None, paper=None, paper_x=None,
                    paper_label: str = "paper", null: str | None = None, null_label: str = "null value",
                    label: str | None = None):
    """Mean of `y` over seeds against `x`, one line per `hue` value, band = +-1 sd across seeds.

    A numeric hue (lambda, alpha, ...) is shown as ordered categories with evenly spaced colours, so log-spaced
    values stay distinguishable; the legend sits outside the axes on the right (`legend=False`: none, e.g. when
    the figure gets one shared legend, `shared_legend`); `label` names the line in the legend when there is no
    `hue`.

    Args:
        paper: the paper's value of `y`, drawn dashed: a number or a sequence of numbers (black lines), or
            {hue value: number or sequence} (lines in that hue's colour); one legend entry `paper_label`.
        paper_x: the same for a value of `x` (vertical dashed lines), e.g. the paper's transition step.
        null: a column of `data` holding a null value of `y` per row (e.g. ``dlr_null``), drawn dotted per hue
            value (its mean over seeds), with one legend entry `null_label`.
    """
    ax = ax or plt.gca()
    order, colours = None, {}
    labels: dict = {}
    if hue is not None:
        data = data.copy()
        values = sorted(data[hue].dropna().unique())
        if pd.api.types.is_numeric_dtype(data[hue]):
            labels = {v: f"{v:g}" for v in values}
            data[hue] = data[hue].map(labels)
            order = [labels[v] for v in values]
        else:
            labels = {v: str(v) for v in values}
            order = values
        colours = _hue_colours(order, palette)
    sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=order, style=style, errorbar=("sd", 1), ax=ax,
                 palette=colours or None, legend=False)
    handles = [Line2D([], [], color=colours[level], lw=2, label=str(level)) for level in (order or [])]
    if hue is None and label:
        handles.append(Line2D([], [], color=sns.color_palette()[0], lw=2, label=label))
    if null is not None and null in data:
        groups = data.groupby(hue) if hue is not None else [(None, data)]
        for level, g in groups:
            mean = g.groupby(x)[null].mean()
            ax.plot(mean.index, mean.to_numpy(), color=colours.get(level, "grey"), **NULL_STYLE)
        handles.append(Line2D([], [], color="grey", label=null_label, **NULL_STYLE))
    drawn = 0
    for values, axis in ((paper, "y"), (paper_x, "x")):
        if values is None:
            continue
        if isinstance(values, Mapping):
            for value, level in values.items():
                colour = colours.get(labels.get(value, _hue_label(value)))
                if colour is not None:
                    drawn += reference_lines(ax, level, axis=axis, label=None, style={"color": colour})
        else:
            drawn += reference_lines(ax, values, axis=axis, label=None)
    if drawn:
        handles.append(Line2D([], [], label=paper_label, **PAPER_STYLE))
    if logx:
        ax.set_xscale("symlog", linthresh=1) if (data[x] <= 0).any() else ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    if handles and legend:
        ax.legend(handles=handles, title=(legend_title if legend_title is not None else hue) or None,
                  loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


def trajectory_panels(data: pd.DataFrame, x: str, panels: Sequence[tuple[str, str, bool]], *, hue: str,
                      legend_title: str, xlabel: str, title: str = "", ncols: int | None = None,
                      width: float = PAGE_WIDTH_IN, height: float = PANEL_HEIGHT_IN, paper: Mapping | None = None,
                      paper_x: Mapping | None = None, paper_label: str = "paper",
                      null: Mapping[str, str] | None = None,
                      marks: Mapping[str, float] | None = None, logx: bool = False, palette=PALETTE):
    """The book's trajectory panels (norm, accuracy, shortcut reliance ... over training): one panel per (column,
    y label, log y) of `panels`, mean ± sd over seeds per `hue` value, in a grid of `ncols` columns (default: 2 for
    two or more panels) at the page's width, with one shared legend — in the grid's empty cell when there is one,
    else below the panels.

    Args:
        paper: {column: the paper's value(s) of that panel} (see `lines_with_band`); paper_x: {column: the
            paper's x value(s) on that panel}.
        null: {column: the column of its null value}.
        marks: {name: x} vertical lines on every panel (`mark_steps`), e.g. the paper's T_mem.
    """
    n = len(panels)
    ncols = ncols or (1 if n == 1 else 2)
    nrows = math.ceil(n / ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(width, height * nrows + (0.3 if title else 0.0)),
                             layout="constrained", squeeze=False)
    cells = list(grid.flat)
    axes = np.array(cells[:n], dtype=object)
    for ax, (column, ylabel, logy) in zip(axes, panels):
        lines_with_band(data, x, column, hue=hue, ax=ax, logy=logy, logx=logx, xlabel=xlabel, ylabel=ylabel,
                        legend_title=legend_title, paper=(paper or {}).get(column),
                        paper_x=(paper_x or {}).get(column), paper_label=paper_label,
                        null=(null or {}).get(column), palette=palette)
    if marks:
        mark_steps(axes, marks)
    for ax in cells[n + 1:]:
        ax.set_axis_off()
    shared_legend(fig, axes, title=legend_title, slot=cells[n] if n < len(cells) else None)
    if title:
        fig.suptitle(title)
    return fig, axes


def mark_steps(axes, steps: dict, *, colour: str = "grey", styles: Sequence[str] = (":", "--", "-.")) -> None:
    """Vertical lines at named steps (e.g. {"T_mem": 800, "T_grok": 1800}) on every axis of `axes`, labelled
    with name and value for the legend (`legend_right`, `shared_legend`); NaN steps (never reached) are left
    out."""
    for ax in np.atleast_1d(axes).flat:
        for i, (name, step) in enumerate(steps.items()):
            if step is not None and np.isfinite(step):
                ax.axvline(step, color=colour, ls=styles[i % len(styles)], lw=1.2, label=f"{name} = {step:,.0f}")


def panel_grid(n: int, ncols: int = 2, width: float = PAGE_WIDTH_IN, height: float = PANEL_HEIGHT_IN,
               sharex: bool = False):
    """(figure, the first n axes) of a grid of `ncols` columns at the page's width, `height` per row; the unused
    cells are switched off (the first of them can take a shared legend: `shared_legend(fig, axes, slot=...)`, the
    figure's ``spare`` attribute)."""
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height * nrows), sharex=sharex, squeeze=False,
                             layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_axis_off()
    fig.spare = axes.flat[n] if n < axes.size else None
    return fig, list(axes.flat[:n])


def scatter_with_fit(x: Sequence[float], y: Sequence[float], fit=None, *, hue=None, ax=None, xlabel: str = "",
                     ylabel: str = "", title: str | None = None, identity: bool = True, legend_title=None,
                     logx: bool = False, logy: bool = False, legend: bool = True):
    """Scatter of measured vs predicted with the fitted line (a LinearFit) and the y = x line; the legend outside
    the axes on the right (`legend=False`: none)."""
    ax = ax or plt.gca()
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not (np.isfinite(x) & np.isfinite(y)).any():
        ax.set_xlabel(xlabel), ax.set_ylabel(ylabel)
        no_data(ax, "no run with a finite value at this scale")
        return ax
    sns.scatterplot(x=x, y=y, hue=hue, ax=ax, palette=PALETTE if hue is not None else None, s=40)
    if len(x) and np.isfinite(x).any():
        xs = np.linspace(np.nanmin(x), np.nanmax(x), 50)
        if fit is not None:
            ax.plot(xs, fit.slope * xs + fit.intercept, color="black", lw=1.5,
                    label=f"fit: slope {fit.slope:.2f}, R² {fit.r2:.2f}")
        if identity:
            ax.plot(xs, xs, color="grey", ls=":", lw=1.2, label="y = x")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if legend:
        legend_right(ax, title=legend_title)
    elif ax.get_legend() is not None:
        ax.get_legend().remove()
    return ax


def no_data(ax, text: str = "nothing to show at this scale") -> None:
    """An axis that says why it is empty (a figure whose runs did not happen at this scale keeps its place)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=FONT_PT, color="grey")
    ax.set_xticks([]), ax.set_yticks([])


def regime_map(summary: pd.DataFrame, x: str, y: str, regime: str = "regime", *, ax=None, xlabel=None,
               ylabel=None, title=None):
    """Heat map of the (majority) regime on a grid of two parameters (e.g. weight decay x norm ratio): one colour
    and one letter per regime (W weak, I intermediate, S strong; the legend at the right spells them out); cells
    without runs are left blank with a dash."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from nhtlib.analysis.regimes import REGIMES, majority_regime

    ax = ax or plt.gca()
    cell = summary.groupby([y, x])[regime].agg(majority_regime).unstack(x)
    codes = cell.apply(lambda col: col.map({r: i for i, r in enumerate(REGIMES)})).to_numpy(float)
    cmap = ListedColormap([REGIME_COLOURS[r] for r in REGIMES])
    cmap.set_bad("#eeeeee")
    ax.imshow(np.ma.masked_invalid(codes), cmap=cmap, vmin=-0.5, vmax=len(REGIMES) - 0.5, aspect="auto",
              origin="lower")
    ax.set_xticks(range(cell.shape[1]), [f"{v:g}" for v in cell.columns])
    ax.set_yticks(range(cell.shape[0]), [f"{v:g}" for v in cell.index])
    for (i, j), value in np.ndenumerate(cell.to_numpy(dtype=object)):
        known = isinstance(value, str)
        ax.text(j, i, REGIME_LETTERS.get(value, "?") if known else "—", ha="center", va="center",
                fontsize=FONT_PT, fontweight="bold", color="white" if value in REGIME_COLOURS else "grey")
    ax.grid(False)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    ax.legend(handles=[Patch(color=REGIME_COLOURS[r], label=f"{REGIME_LETTERS[r]}  {r}") for r in REGIMES],
              bbox_to_anchor=(1.02, 1), loc="upper left", borderaxespad=0.0, title="regime (majority)")
    return ax


def image_rows(rows: dict, *, title: str = "", col_titles: Sequence[str] | None = None, size: float | None = None,
               width: float = PAGE_WIDTH_IN, label_width: float = 1.1):
    """One row of images per entry of `rows` ({row label: images (N, 3, H, W) tensor, values in [0, 1]}), without
    ticks, the label on the left of each row, optional column titles on the first row, at the page's width (each
    image `size` inches, default: what fits beside the labels). Returns the figure."""
    n_cols = max(len(images) for images in rows.values())
    size = size or (width - label_width) / n_cols
    top = 0.3 if col_titles else 0.0
    fig, axes = plt.subplots(len(rows), n_cols, figsize=(size * n_cols + label_width, (size + 0.08) * len(rows) + top
                                                         + (0.3 if title else 0.0)),
                             squeeze=False, layout="constrained")
    fig.get_layout_engine().set(w_pad=0.01, h_pad=0.01, wspace=0.02, hspace=0.02)
    for row_axes, (label, images) in zip(axes, rows.items()):
        for ax in row_axes:
            ax.set_xticks([]), ax.set_yticks([])
            ax.grid(False)
        for ax, image in zip(row_axes, images):
            ax.imshow(image.clamp(0, 1).permute(1, 2, 0).cpu().numpy())
        row_axes[0].set_ylabel(label, fontsize=SMALL_FONT_PT, rotation=0, ha="right", va="center")
    for ax, text in zip(axes[0], col_titles or []):
        ax.set_title(text, fontsize=SMALL_FONT_PT, fontweight="normal")
    if title:
        fig.suptitle(title, fontsize=FONT_PT)
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
            ax.text(i, 0.05, empty_text, ha="center", fontsize=SMALL_FONT_PT, color="grey")
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
    ax.legend(handles.values(), handles.keys(), loc="lower left", fontsize=SMALL_FONT_PT)
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


def figure_bytes(fig, fmt: str) -> bytes:
    """`fig` as a file of format `fmt` ("svg" or "png" at `FILE_DPI`), byte-identical for an identical figure: no
    creation date in the metadata and a fixed salt for the SVG's ids (matplotlib otherwise draws a random one)."""
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT}):
        fig.savefig(buffer, format=fmt, dpi=FILE_DPI, metadata={"Date": None})
    return buffer.getvalue()


def save_figure(fig, name: str, *, chapter: str, scale: str) -> dict[str, Path]:
    """Write `fig` as figures/<name>.svg and figures/<name>.png into the chapter's results folder
    (`nhtlib.paths.chapter_dir`: results/<scale>/<chapter>/, or the runner's staging folder while it runs the
    chapter, so the files are swapped in with the executed notebook). Returns {format: path}."""
    if not FIGURE_NAME.match(name):
        raise ValueError(f"figure name {name!r} of chapter {chapter!r}: use lower-case words joined by '-' "
                         f"(e.g. 'lambda-sweep'); it names the files figures/<name>.svg and .png")
    folder = chapter_dir(chapter, scale) / "figures"
    paths = {fmt: folder / f"{name}.{fmt}" for fmt in FIGURE_FORMATS}
    for fmt, path in paths.items():
        atomic_write_bytes(path, figure_bytes(fig, fmt))
    return paths


def show(fig, name: str, *, chapter: str, scale: str) -> None:
    """Save `fig` beside the chapter's executed notebook (`save_figure`), then show it in the page as
    `plt.show()` does (the page's figure is unchanged). Returns None, as `plt.show()` does, so that a cell ending
    with it shows the figure and nothing else."""
    save_figure(fig, name, chapter=chapter, scale=scale)
    plt.show()
