"""The book's citations and figure references, read from its sources (no build): every {cite} key is in
book/references.bib and every entry is cited; no figure number of the book is typed (Sphinx numbers the figures,
the text links them with {numref}); every {numref} names a figure of its own notebook; and `nht.plots.show` writes
the same bytes for the same figure (SVG and PNG), so a rebuilt chapter's figure files do not change."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "book" / "references.bib"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PAGES = sorted((ROOT / "book").glob("*.md"))

CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")
BIB_KEY = re.compile(r"^@\w+\{([^,\s]+),", re.M)
NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?([^`<>]+)>?`")
# a number of the book's own figures ("Fig. 3.1", "Figs. 4.2a"): the papers' figures are "Fig. 1", "its Fig. 4b"
TYPED_FIGURE_NUMBER = re.compile(r"\bFigs?\.\s*\d+\.\d+")
FIGURE_LABEL_REF = re.compile(r"\{ref\}`[^`]*<fig-[^>]*>`|\{ref\}`fig-[^`]*`")


def cited_keys(text: str) -> list[str]:
    """Every key of every {cite} role in `text` ({cite:p}`a,b` cites a and b)."""
    return [key.strip() for keys in CITE.findall(text) for key in keys.split(",")]


def bib_keys(text: str) -> list[str]:
    return BIB_KEY.findall(text)


def notebook_texts(path: Path) -> list[str]:
    """The prose of a notebook: its markdown cells and its figure captions (cell metadata mystnb.figure)."""
    texts = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            texts.append("".join(cell["source"]))
        caption = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption")
        if caption:
            texts.append(caption)
    return texts


def figure_names(path: Path) -> list[str]:
    return [c["metadata"]["mystnb"]["figure"]["name"] for c in json.loads(path.read_text())["cells"]
            if c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")]


def all_sources() -> dict[str, str]:
    sources = {p.relative_to(ROOT).as_posix(): "\n".join(notebook_texts(p)) for p in NOTEBOOKS}
    sources.update({p.relative_to(ROOT).as_posix(): p.read_text() for p in PAGES})
    return sources


def test_the_parsers_see_what_they_should():
    """The checks below are only as good as their patterns: planted texts are read as intended."""
    assert cited_keys("see {cite}`nht` and {cite:p}`a, b`; {cite:t}`dlr`") == ["nht", "a", "b", "dlr"]
    assert bib_keys("@misc{nht,\n title={x}}\n@article{kornblith2019cka,\n}") == ["nht", "kornblith2019cka"]
    assert NUMREF.findall("{numref}`fig-ch1-a` and {numref}`Fig. {number}a <fig-ch1-b>`") == ["fig-ch1-a",
                                                                                            "fig-ch1-b"]
    assert TYPED_FIGURE_NUMBER.search("as Fig. 3.1 shows") and TYPED_FIGURE_NUMBER.search("above Figs. 4.2a")
    assert not TYPED_FIGURE_NUMBER.search("the paper's Fig. 1 and its Fig. 4b")
    assert FIGURE_LABEL_REF.search("{ref}`Fig. 1.1 <fig-1-1>`") and not FIGURE_LABEL_REF.search("{ref}`ref-nht-5`")


def test_the_bibliography_page_lists_references_bib():
    assert BIB.exists(), "book/references.bib is missing"
    assert "```{bibliography}" in (ROOT / "book" / "bibliography.md").read_text()
    assert "book/bibliography" in (ROOT / "_toc.yml").read_text(), "book/bibliography.md is not in _toc.yml"
    assert "book/references.bib" in (ROOT / "_config.yml").read_text(), "_config.yml: bibtex_bibfiles is not set"


def test_every_cited_key_is_in_references_bib():
    keys = set(bib_keys(BIB.read_text()))
    missing = {(where, key) for where, text in all_sources().items() for key in cited_keys(text) if key not in keys}
    assert not missing, f"cited but not in book/references.bib (add the entry): {sorted(missing)}"


def test_every_entry_is_cited_and_defined_once():
    keys = bib_keys(BIB.read_text())
    assert len(keys) == len(set(keys)), f"book/references.bib defines a key twice: {sorted(keys)}"
    cited = {key for text in all_sources().values() for key in cited_keys(text)}
    uncited = sorted(set(keys) - cited)
    assert not uncited, f"book/references.bib entries no page cites (cite them or remove them): {uncited}"
    assert {"nht", "nsdl", "dlr"} <= set(keys)


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_no_figure_number_is_typed(path):
    """Sphinx numbers the figures: a typed "Fig. 3.1" (in the prose or a caption) or a {ref} with its own text to a
    figure would go stale when a figure is added; {numref}`fig-…` says the number Sphinx gave."""
    texts = notebook_texts(path) if path.suffix == ".ipynb" else [path.read_text()]
    for text in texts:
        bare = NUMREF.sub("", text)
        typed = TYPED_FIGURE_NUMBER.findall(bare) + FIGURE_LABEL_REF.findall(bare)
        assert not typed, f"{path.name}: typed figure numbers {typed}; write {{numref}}`fig-…` instead"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_numref_names_a_figure_of_its_notebook(path):
    names = figure_names(path)
    assert len(names) == len(set(names)), f"{path.name}: two figures share a name: {names}"
    for name in names:
        assert re.fullmatch(r"fig-ch\d+-[a-z0-9-]+", name), f"{path.name}: figure name {name!r} is not fig-ch<N>-<what>"
    unknown = [t for text in notebook_texts(path) for t in NUMREF.findall(text) if t not in names]
    assert not unknown, f"{path.name}: {{numref}} to figures it does not define: {unknown} (its figures: {names})"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_cell_saves_its_figure(path):
    """A figure cell (one with a caption) saves what it shows, under its figure's name, through nht.plots.show."""
    for cell in json.loads(path.read_text())["cells"]:
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure:
            source = "".join(cell["source"])
            file_name = figure["name"].split("-", 2)[2]
            assert f'nht.plots.show(' in source and f'"{file_name}"' in source, \
                f"{path.name}: the cell of {figure['name']} does not save it with nht.plots.show(fig, {file_name!r}, …)"
            assert "plt.show()" not in source, f"{path.name}: {figure['name']} is shown with plt.show(), not saved"


def _figure():
    import matplotlib.pyplot as plt

    import nhtlib as nht

    fig, ax = nht.plots.subplots()
    ax.plot([0, 1, 2], [1, 0, 2], label="a line")
    ax.imshow([[0, 1], [1, 0]], extent=(0, 1, 0, 1))  # an embedded raster: its bytes must be stable too
    ax.legend()
    return fig, plt


def test_show_writes_identical_bytes_twice(isolated_results):
    import nhtlib as nht

    fig, plt = _figure()
    folder = nht.paths.chapter_dir("01_toy_norm_hierarchy", "smoke") / "figures"
    nht.plots.save_figure(fig, "lambda-sweep", chapter="01_toy_norm_hierarchy", scale="smoke")
    first = {fmt: (folder / f"lambda-sweep.{fmt}").read_bytes() for fmt in ("svg", "png")}
    plt.close(fig)
    fig, plt = _figure()
    nht.plots.show(fig, "lambda-sweep", chapter="01_toy_norm_hierarchy", scale="smoke")
    second = {fmt: (folder / f"lambda-sweep.{fmt}").read_bytes() for fmt in ("svg", "png")}
    assert first["svg"].startswith(b"<?xml") and first["png"].startswith(b"\x89PNG")
    assert first == second, "the same figure saved twice gave different bytes (date metadata? SVG hash salt?)"
    assert b"<dc:date>" not in first["svg"]
    plt.close("all")


def test_figure_files_differ_for_different_figures(isolated_results):
    """The byte-identity above is not trivially true: another figure gives other bytes."""
    import nhtlib as nht

    fig, plt = _figure()
    one = nht.plots.figure_bytes(fig, "svg")
    fig.axes[0].plot([0, 2], [2, 0])
    assert nht.plots.figure_bytes(fig, "svg") != one
    plt.close("all")


def test_show_refuses_a_name_that_is_no_file_name(isolated_results):
    import nhtlib as nht

    fig, plt = _figure()
    with pytest.raises(ValueError, match="lower-case words joined by '-'"):
        nht.plots.save_figure(fig, "../Fig 3.1", chapter="01_toy_norm_hierarchy", scale="smoke")
    plt.close("all")
