"""A hostile value never becomes markup on a built page: a one-page Jupyter Book whose provenance box carries a hostile
parameter, device and date, and whose claims (verdict paragraph, Scoreboard section, headline, the HTML claims
table, the verdicts at a glance) carry a hostile statement and verdict, built by jupyter-book with warnings as errors
(an unknown role that got through would warn), then read as HTML and, where Chromium is installed, loaded in it
(headless, no network, as tests/test_book.py does): no injected element exists, no injected script ran, and the
payload is on the page as text."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from nhtlib.report import claims as claims_module
from nhtlib.report import provenance
from nhtlib.report.verdicts import ClaimResult
from test_book import _browse, _chromium, _visible_text

pytestmark = pytest.mark.slow

# what would run if it were markup: each marks the page (data-pwned) so that the browser can tell. No quotes: Sphinx's
# smartquotes would curl them (text, not markup, but then the text is not the payload's own)
HOSTILE = ("<img src=x onerror=alert(1)> <img src=y onerror=document.documentElement.dataset.pwned=1> "
           "<script>document.documentElement.dataset.pwned=2</script> {raw}`html <b id=pwned>b</b>` "
           "{ref}`pwned <page>` {raw} $x$ a|b [link](javascript:alert(1)) **fake**")
CHAPTER = "page"
BUILD_TIMEOUT_S = 300


def hostile_claims() -> tuple[pd.DataFrame, ClaimResult]:
    """The claims of the page (a hostile statement, ours, rule and note; a hostile verdict and id) and its row."""
    row = ClaimResult(id="P1", statement=HOSTILE, paper=HOSTILE, source="NHT", ours=HOSTILE, n=3, low=0.1, high=0.2,
                      rule=HOSTILE, verdict="reproduced", null=False, note=HOSTILE, to_decide=HOSTILE)
    odd = ClaimResult(id="P`2", statement="a second claim", paper="—", source="book", ours="—", n=None, low=None,
                      high=None, rule="", verdict=HOSTILE, null=False)
    frame = pd.DataFrame([{"chapter": CHAPTER, **asdict(r), "scale": "smoke"} for r in (row, odd)])
    return frame, row


def hostile_record() -> dict:
    return {"chapter": CHAPTER, "scale": "smoke", "device": HOSTILE, "torch_version": "2.5.1",
            "git_commit": "0123456789abcdef", "nhtlib_source_hash": "feed", "seeds": [0, 1, 2], "runs": 3,
            "runs_trained": 1, "runs_cached": 2, "wall_time_s": 1.0, "train_time_s": 0.5, "finished_at": HOSTILE,
            "run_environments": [{"device": "cpu", "device_name": HOSTILE, "python": "3.11", "numpy": "2.1",
                                  "torch": "2.5.1", "cuda": None, "cudnn": None, "runs": 3}],
            "non_default_parameters": {"note": HOSTILE, "seed": 3}}


def markdown_output(text: str):
    return nbformat.v4.new_output("display_data", data={"text/markdown": text, "text/plain": "<Markdown>"})


def write_book(source: Path) -> None:
    """The one-page book: notebooks/page.ipynb, executed already (its outputs made here), opened by the box."""
    frame, row = hostile_claims()
    notebooks = source / "notebooks"
    files = notebooks / provenance.files_folder(CHAPTER)
    files.mkdir(parents=True)
    frame.to_csv(files / "claims.csv", index=False)
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    shown = nbformat.v4.new_code_cell("claims.show('P1')")
    shown.outputs = [
        markdown_output(claims_module.verdict_markdown(row)),
        markdown_output(claims_module.headline_markdown(frame)),
        markdown_output(claims_module.chapter_sections_markdown(frame, {CHAPTER: "A hostile page"}, {})),
        markdown_output(claims_module.to_decide_markdown(frame.assign(verdict="inconclusive"),
                                                         {CHAPTER: "A hostile page"})),
        nbformat.v4.new_output("display_data", data={
            "text/html": claims_module.style_claims(frame[["id", "verdict", "statement", "rule"]]).to_html(),
            "text/plain": "<Styler>"})]
    nb.cells = [nbformat.v4.new_markdown_cell("# A hostile page\n\nIts values try to become markup."), shown]
    page = notebooks / f"{CHAPTER}.ipynb"
    nbformat.write(nb, str(page))
    box = provenance.box_markdown(hostile_record(), frame[["id", "verdict", "statement"]],
                                  download=f"{CHAPTER}.ipynb", files=["claims.csv"])
    provenance.insert_box(page, box)
    (source / "_toc.yml").write_text(f"format: jb-book\nroot: notebooks/{CHAPTER}\n")
    (source / "_config.yml").write_text(json.dumps({  # YAML is a superset of JSON
        "title": "hostile", "only_build_toc_files": True, "execute": {"execute_notebooks": "off"},
        "parse": {"myst_enable_extensions": ["colon_fence", "dollarmath"]},
        "sphinx": {"config": {"nb_render_markdown_format": "myst"}}}))


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory) -> Path:
    """The built page (html), with jupyter-book's warnings as errors."""
    source = tmp_path_factory.mktemp("hostile-book")
    write_book(source)
    jb = Path(sys.executable).with_name("jupyter-book")
    out = tmp_path_factory.mktemp("hostile-site")
    proc = subprocess.run([str(jb) if jb.exists() else "jupyter-book", "build", str(source), "--path-output",
                           str(out), "-W", "-n", "--keep-going"], capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert proc.returncode == 0, "the hostile page did not build:\n" + (proc.stdout + proc.stderr)[-5000:]
    page = out / "_build" / "html" / "notebooks" / f"{CHAPTER}.html"
    assert page.exists(), sorted(p.name for p in (out / "_build" / "html").rglob("*.html"))
    return page


class _Elements(HTMLParser):
    """Every element (tag, attributes) and the text inside each <script> of an HTML document."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.scripts, self._in_script = [], [], False
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def injected(document: str) -> list[str]:
    """What of the payload became markup in `document`: elements with the payload's event handlers, its own
    elements (src x or y, id pwned) and scripts, links to javascript:, math (the page has none but the payload's
    $x$)."""
    found = _Elements(document)
    out = [f"<{tag} {attrs}>" for tag, attrs in found.elements  # (the theme's own onclick handlers are not ours)
           if any(name.startswith("on") and ("alert" in str(value) or "pwned" in str(value))
                  for name, value in attrs.items()) or attrs.get("id") == "pwned"
           or attrs.get("src") in ("x", "y") or str(attrs.get("href", "")).startswith("javascript:")]
    out += [f"<script>{s[:80]}" for s in found.scripts if "pwned" in s or "alert(1)" in s]
    out += [f"<{tag} class=math>" for tag, attrs in found.elements if "math" in attrs.get("class", "").split()]
    return out


def test_the_built_page_shows_the_payload_as_text(hostile_page):
    document = hostile_page.read_text()
    assert not injected(document)
    text = _visible_text(document)
    # the box (parameter, device, date, the runs' device), its glance, the verdict paragraph (statement, ours, note),
    # the Scoreboard's section (statement, paper, ours) and the HTML claims table (statement, rule, verdict)
    assert text.count(HOSTILE) >= 10, text.count(HOSTILE)
    assert "nht-provenance" in document  # the box is there, as the dropdown it should be
    assert 'href="../_downloads/' in document  # the box's file links resolved to files Sphinx copied


def test_the_page_in_a_browser_runs_nothing_of_the_payload(hostile_page, tmp_path):
    _chromium()  # skips without Chromium (a failure when $CI is set)
    dom = _browse(hostile_page, tmp_path / "profile", "--dump-dom")
    assert "<html" in dom and "A hostile page" in dom
    assert not injected(dom), injected(dom)
    html_tag = dom[dom.index("<html"):dom.index(">", dom.index("<html"))]
    assert "data-pwned" not in html_tag, "an injected handler or script ran in the browser"
    assert _visible_text(dom).count(HOSTILE) >= 10
