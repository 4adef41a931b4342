"""End-to-end checks of the book: the chapter runner's errors, the book builder (every chapter at smoke scale, then
the Jupyter Book site with warnings as errors; a second build trains and executes nothing) and the built pages in a
real headless browser (offline MathJax, images, tables, the provenance box, figure and table sizes).

Every chapter is executed once: by nbval (`make test` runs the notebooks as ``pytest --nbval-lax`` items first; the
root conftest.py keeps their outputs as the chapters' results in $NHT_BOOK_RESULTS, which this module reads), or,
when this module runs alone, by the book builder itself. Everything runs at scale 'smoke' and writes into temporary
folders, never into results/.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

import nhtlib
from nhtlib.cli import runner as chapters

pytestmark = pytest.mark.slow

ROOT = nhtlib.paths.repo_root()
CHAPTERS = chapters.list_chapters() if ROOT is not None else []
BOOK_TIMEOUT_S = 1500


@pytest.fixture(scope="module", autouse=True)
def smoke_env(tmp_path_factory):
    """One results folder for the whole module: the one the nbval run of the chapters filled ($NHT_BOOK_RESULTS),
    else a new temporary one (the book builder then executes the chapters)."""
    shared = os.environ.get("NHT_BOOK_RESULTS")
    results = Path(shared) if shared else tmp_path_factory.mktemp("results")
    saved = {k: os.environ.get(k) for k in ("NHT_RESULTS", "NHT_SCALE")}
    os.environ["NHT_RESULTS"] = str(results)
    os.environ["NHT_SCALE"] = "smoke"
    yield results
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def isolated_results(smoke_env):
    """Overrides conftest's per-test results folder: this module shares the folder set by `smoke_env`."""
    yield smoke_env


def test_repository_layout():
    assert ROOT is not None, "nhtlib must be installed editable from the book's checkout (pip install -e .)"
    assert CHAPTERS, f"no chapter notebooks found in {ROOT / 'notebooks'}"
    toc = (ROOT / "_toc.yml").read_text()
    for name in CHAPTERS:
        assert f"notebooks/{name}" in toc, f"notebooks/{name}.ipynb is not listed in _toc.yml"


# (a) every chapter at smoke scale records what chapter 6 gathers -------------------------------------------

def test_every_shortcut_domain_records_its_separation_scores(smoke_env, built_book):
    """The S spectrum of chapter 6 gathers what chapters 1-4 recorded (executed for the book, in this folder)."""
    from nhtlib.analysis import separation

    domains = set(separation.load("smoke").domain)
    assert {"toy (XOR, ours)", "modular arithmetic", "CIFAR-10 borders", "CelebA"} <= domains, domains
    assert any(d.startswith("Waterbirds") for d in domains), domains


# (b) unknown parameter names, (c) invalid values -------------------------------------------------------------

def test_unknown_parameter_is_named():
    name = CHAPTERS[0]
    with pytest.raises(chapters.ChapterUsageError) as info:
        chapters.run_chapter(name, {"scale": "smoke", "no_such_parameter": 3})
    message = str(info.value)
    assert "no_such_parameter" in message
    assert "allowed:" in message
    for allowed in ("scale", "device", "seed", "data_root"):
        assert allowed in message


def test_cli_unknown_parameter_exits_nonzero():
    name = CHAPTERS[0]
    proc = subprocess.run([sys.executable, "-m", "nhtlib", "run", name, "-p", "scael", "smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "unknown parameter 'scael'" in proc.stderr
    assert "allowed: scale" in proc.stderr


def test_cli_list():
    proc = subprocess.run([sys.executable, "-m", "nhtlib", "list"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in CHAPTERS:
        assert name in proc.stdout


def test_parse_value_like_papermill():
    assert chapters.parse_value("1") == 1 and isinstance(chapters.parse_value("1"), int)
    assert chapters.parse_value("0.5") == 0.5
    assert chapters.parse_value("True") is True and chapters.parse_value("False") is False
    assert chapters.parse_value("None") is None
    assert chapters.parse_value("cpu") == "cpu"


def test_invalid_scale_fails_with_config_error(smoke_env):
    name = CHAPTERS[0]
    with pytest.raises(chapters.ChapterError) as info:
        chapters.run_chapter(name, {"scale": "huge"})
    message = str(info.value)
    assert "ConfigError" in message
    assert "scale='huge' is not allowed; choose one of 'smoke', 'cpu', 'paper'" in message
    assert not (smoke_env / "huge").exists()


# (d) the whole book builds at smoke scale, warnings are errors -----------------------------------------------

@pytest.fixture(scope="module")
def built_book(tmp_path_factory, smoke_env):
    """`python -m nhtlib build` at smoke scale into a temporary folder: (exit status, its output, the html folder)."""
    assert (ROOT / "node_modules" / "mathjax" / "es5" / "tex-svg.js").exists(), \
        "MathJax is missing: run `npm ci` (or `make venv`) in the repository"
    out = tmp_path_factory.mktemp("book")
    cmd = [sys.executable, "-m", "nhtlib", "build", "--scale", "smoke", "--path-output", str(out)]
    env = dict(os.environ, NHT_SCALE="smoke", NHT_RESULTS=str(smoke_env))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BOOK_TIMEOUT_S, env=env)
    elapsed = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    (out / "build.log").write_text(log)
    print(f"book build at smoke scale: {elapsed:.1f} s\n" + proc.stdout[-3000:])
    return proc.returncode, log, out / "_build" / "html"


def _html(built_book) -> Path:
    returncode, _, html_dir = built_book
    if returncode != 0:
        pytest.fail("the book did not build (see test_book_builds_without_warnings)")
    return html_dir


def test_book_builds_without_warnings(built_book):
    returncode, log, html_dir = built_book
    problems = [line for line in log.splitlines() if re.search(r"WARNING|ERROR|CRITICAL", line)
                and "IPKernelApp" not in line]
    assert returncode == 0, "jupyter-book build failed:\n" + "\n".join(problems[:50]) + "\n...\n" + log[-4000:]
    for page in ["book/intro.html", "book/scoreboard.html", "book/api.html", "book/reference.html"] + \
            [f"notebooks/{name}.html" for name in CHAPTERS]:
        assert (html_dir / page).exists(), page
    assert "wall s" in log and "total" in log, "the build prints its table of wall time per chapter"
    for i, name in enumerate(CHAPTERS, 1):
        assert f"[chapter {i} of {len(CHAPTERS)}] {name}" in log


def test_second_build_trains_and_executes_nothing(built_book, smoke_env):
    """Nothing changed since the build above: every chapter is up to date, no run is trained, no page re-made."""
    _html(built_book)
    runs = smoke_env / "cache" / "runs"
    before = sorted(p.name for p in runs.glob("*.json"))
    records = {name: (smoke_env / "smoke" / name / "run.json").read_bytes() for name in CHAPTERS}
    proc = subprocess.run([sys.executable, "-m", "nhtlib", "build", "--scale", "smoke", "--no-site"],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, NHT_SCALE="smoke", NHT_RESULTS=str(smoke_env)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in CHAPTERS:
        assert re.search(rf"{name}\s+up to date\s+\d+\s+0\s", proc.stdout), proc.stdout
    assert "sweep " not in proc.stdout and "executing the notebook" not in proc.stdout
    assert sorted(p.name for p in runs.glob("*.json")) == before
    assert {name: (smoke_env / "smoke" / name / "run.json").read_bytes() for name in CHAPTERS} == records


def test_book_is_offline(built_book):
    """No page loads a script or stylesheet from the network; MathJax comes from _static/es5/."""
    html_dir = _html(built_book)
    for page in html_dir.rglob("*.html"):
        text = page.read_text(errors="replace")
        remote = re.findall(r'<(?:script|link|img)\b[^>]*(?:src|href)="((?:https?:)?//[^"]*)"', text)
        remote = [u for u in remote if not u.startswith(("https://arxiv.org", "https://papermill"))]
        assert not remote, f"{page.relative_to(html_dir)} loads {remote}"
        assert "cdn.jsdelivr.net" not in text and "mathjax@3" not in text, page
    intro = (html_dir / "book" / "intro.html").read_text()
    assert 'src="../_static/es5/tex-svg.js' in intro
    assert (html_dir / "_static" / "es5" / "tex-svg.js").exists()


def test_scoreboard_ran_after_the_chapters(built_book):
    html_dir = _html(built_book)
    board = (html_dir / "book" / "scoreboard.html").read_text()
    rows = [re.sub(r"<[^>]+>", " ", row) for row in re.findall(r"<tr\b.*?</tr>", board, re.S)]
    for name in CHAPTERS:
        own = [row for row in rows if name in row]
        assert own, f"chapter {name} is missing from the scoreboard"
        assert not any("chapter not executed" in row for row in own), \
            f"the scoreboard was executed before chapter {name} (Sphinx read order, see book/_ext/nht_read_order.py)"


def test_scoreboard_says_whether_the_verdicts_survive_another_block_of_seeds(built_book):
    # the book is built at smoke scale, where no seed-block record exists: the section says so instead of a table
    board = re.sub(r"<[^>]+>", " ", (_html(built_book) / "book" / "scoreboard.html").read_text())
    assert "Do the verdicts survive another block of seeds?" in board
    assert "No chapter has a seed-block record at this scale." in board


# (e) the built pages in a real browser -----------------------------------------------------------------------

def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed but CI is set: the browser checks must run (apt-get install chromium)")
    pytest.skip("chromium is not installed (set CI=1 to make this a failure)")


def _browse(page: Path, profile: Path, *extra: str) -> str:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           # no network at all: everything the page needs must come from the build folder
           "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=10000", *extra, page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium failed on {page}: {proc.stderr[-2000:]}"
    return proc.stdout


_PROBE = """
<script>
window.addEventListener("load", function () {
  var ready = (window.MathJax && MathJax.startup && MathJax.startup.promise) || Promise.resolve();
  ready.then(function () {
    // before any dropdown is opened: where the first figure sits, in screens of this window (issue 23)
    var sy = window.scrollY, H = 900;  // a screen of the 1,400 x 900 (or 420 x 900) window the reader has
    var figs = Array.from(document.querySelectorAll("article img")).filter(function (i) {
      return i.getBoundingClientRect().height > 50; });
    var firstFigure = figs.length ? (figs[0].getBoundingClientRect().top + sy) / H : null;
    var captions = Array.from(document.querySelectorAll("article figcaption")).map(function (c) {
      var fig = c.closest("figure");
      return {text: c.textContent.trim(), id: fig ? fig.id : "",
              numbers: c.querySelectorAll(".caption-number").length};
    });
    // links in the text to a figure of this page; a caption's own permalink (the "#" Sphinx adds) is no such link
    var figRefs = Array.from(document.querySelectorAll("article a[href^='#fig-']:not(.headerlink)")).map(function (a) {
      return {text: a.textContent.trim(), target: a.getAttribute("href").slice(1)};
    });
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
    var verdictWords = /^(reproduced|partly|not reproduced|inconclusive|not testable here)$/;
    var verdictCells = Array.from(document.querySelectorAll("article td")).filter(function (td) {
      return verdictWords.test(td.textContent.trim()); }).map(function (td) {
      return td.getBoundingClientRect().right; });
    var skip = "script,style,pre,code,textarea,mjx-container,.highlight";
    var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    var text = [], node;
    while ((node = walker.nextNode())) {
      if (!node.parentElement.closest(skip)) { text.push(node.nodeValue); }
    }
    var report = {
      title: (document.querySelector("h1") || {}).textContent || "",
      tables: document.querySelectorAll("table").length,
      mjx: document.querySelectorAll("mjx-container").length,
      mathjax_loaded: !!(window.MathJax && MathJax.version),
      images: Array.from(document.images).map(function (im) {
        return {src: im.getAttribute("src"), loaded: im.complete && im.naturalWidth > 0,
                natural: im.naturalWidth, shown: im.getBoundingClientRect().width,
                alt: im.getAttribute("alt") || ""};
      }),
      table_sizes: Array.from(document.querySelectorAll("article table")).map(function (t) {
        var column = t.closest("article").getBoundingClientRect().width;
        return {width: t.getBoundingClientRect().width, column: column,
                head: (t.querySelector("tr") || {}).textContent || ""};
      }),
      provenance: Array.from(document.querySelectorAll(".nht-provenance")).map(function (b) {
        return b.textContent;
      }),
      downloads: Array.from(document.querySelectorAll(".nht-provenance a")).map(function (a) {
        return a.getAttribute("href") || "";
      }).filter(function (h) { return /\\.ipynb$/.test(h); }),
      takeaways: Array.from(document.querySelectorAll(".nht-provenance a")).map(function (a) {
        return a.getAttribute("href") || "";
      }).filter(function (h) { return /_downloads[/]/.test(h) && !/\\.ipynb$/.test(h); }),
      verdict_right: Array.from(document.querySelectorAll(".nht-provenance td:nth-child(2)")).map(function (td) {
        return td.getBoundingClientRect().right;
      }),
      viewport: window.innerWidth,
      first_figure_screens: firstFigure,
      captions: captions,
      fig_refs: figRefs,
      verdict_cells: verdictCells,
      text: text.join(" ")
    };
    var pre = document.createElement("pre");
    pre.id = "nht-probe";
    pre.textContent = JSON.stringify(report);
    document.body.appendChild(pre);
  });
});
</script>
"""


def _probe(page: Path, profile: Path, width: int = 1400) -> dict:
    """Open a copy of `page` (same folder, so relative links hold) in a window `width` px wide that reports what
    the browser rendered."""
    probe_page = page.with_name(page.stem + ".nht-probe.html")
    probe_page.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    dom = _browse(probe_page, profile, "--dump-dom", f"--window-size={width},2400")
    match = re.search(r'<pre id="nht-probe"[^>]*>(.*?)</pre>', dom, re.S)
    assert match, f"the probe did not report for {page.name} (JavaScript or MathJax failed?):\n{dom[-2000:]}"
    return json.loads(html.unescape(match.group(1)))


class _VisibleText(HTMLParser):
    SKIP = {"script", "style", "pre", "code", "textarea", "mjx-container"}

    def __init__(self):
        super().__init__()
        self.depth, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def _visible_text(dom: str) -> str:
    parser = _VisibleText()
    parser.feed(dom)
    return " ".join(parser.parts)


RAW_MATH = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")


@pytest.fixture(scope="module")
def browser_profile(tmp_path_factory, built_book):
    returncode, _, _ = built_book
    if returncode != 0:
        pytest.skip("the book did not build (see test_book_builds_without_warnings)")
    _chromium()
    return tmp_path_factory.mktemp("chromium-profile")


def test_browser_intro_math_is_typeset(built_book, browser_profile):
    _, _, html_dir = built_book
    page = html_dir / "book" / "intro.html"
    dom = _browse(page, browser_profile, "--dump-dom")
    assert "nht-book" in dom and "<h1" in dom
    assert dom.count("<mjx-container") >= 3, "MathJax did not typeset the intro's math"
    raw = RAW_MATH.findall(_visible_text(dom))
    assert not raw, f"untypeset math delimiters left in the intro: {raw[:5]}"
    report = _probe(page, browser_profile)
    print("intro:", {k: v for k, v in report.items() if k != "text"})
    assert report["mathjax_loaded"] and report["mjx"] >= 3
    assert not RAW_MATH.findall(report["text"])


@pytest.mark.parametrize("name", CHAPTERS)
def test_browser_chapter_page(name, built_book, browser_profile, tmp_path):
    _, _, html_dir = built_book
    page = html_dir / "notebooks" / f"{name}.html"
    static_html = page.read_text()
    dom = _browse(page, browser_profile, "--dump-dom")
    text = _visible_text(dom)
    assert len(text.split()) > 50, f"{name}: the rendered page is (nearly) blank"
    report = _probe(page, browser_profile)
    print(name, {k: v for k, v in report.items() if k != "text"})
    assert report["title"].strip(" #¶\n"), f"{name}: no chapter title (h1)"
    # every image exists on disk and was decoded by the browser
    assert report["images"], f"{name}: the chapter shows no figure"
    for image in report["images"]:
        src = image["src"]
        if not src.startswith("data:"):
            assert (page.parent / src.split("#")[0].split("?")[0]).resolve().exists(), f"{name}: missing {src}"
        assert image["loaded"], f"{name}: image {src[:80]} did not load"
    # the provenance box opens the page, with the download link and the command that re-runs the chapter
    assert report["provenance"], f"{name}: no provenance box"
    box = report["provenance"][0]
    for fact in ("scale", "device", "torch", "commit", "nhtlib source", "seeds", "runs", "wall time", "built",
                 f"python -m nhtlib run {name}", "Verdicts at a glance"):
        assert fact in box, f"{name}: the provenance box does not say {fact!r}"
    assert report["downloads"], f"{name}: no download link for the notebook"
    download = (page.parent / report["downloads"][0]).resolve()
    assert download.exists() and download.suffix == ".ipynb", f"{name}: the download link is broken"
    # ... and the links to its numbers: claims, run tables (chapters that train), every figure as SVG and PNG
    taken = {Path(h).name: (page.parent / h).resolve() for h in report["takeaways"]}
    for file, where in taken.items():
        assert where.is_file() and where.stat().st_size > 0, f"{name}: the box links {file}, which is not in the site"
    wanted = {"claims.csv", "runs.parquet", "runs_summary.csv"}  # chapter 6's tables: the runs it reads
    assert wanted <= set(taken), f"{name}: the box does not link {sorted(wanted - set(taken))}"
    figures = {Path(f).stem for f in taken if f.endswith((".svg", ".png"))}
    assert figures and all({f"{stem}.svg", f"{stem}.png"} <= set(taken) for stem in figures), \
        f"{name}: the box does not link every figure as both SVG and PNG"
    assert len(figures) >= len(report["captions"]), f"{name}: {len(report['captions'])} figures, {figures} linked"
    _check_layout(name, report)
    # at phone width the verdicts at a glance are visible without scrolling sideways
    phone = _probe(page, browser_profile, width=420)
    assert phone["verdict_right"] and max(phone["verdict_right"]) <= phone["viewport"], \
        f"{name}: at 420 px a verdict lies beyond the screen ({max(phone['verdict_right'] or [0]):.0f} px)"
    # the page opens like a paper: its key figure within 2 screens (4 on a phone); every verdict of every claims
    # table inside a phone's screen; one number per caption, the one the text's references use
    assert report["first_figure_screens"] is not None and report["first_figure_screens"] <= 2, \
        f"{name}: the first figure appears after {report['first_figure_screens']:.1f} screens at 1,400 px"
    assert phone["first_figure_screens"] <= 4, \
        f"{name}: the first figure appears after {phone['first_figure_screens']:.1f} screens on a phone"
    assert phone["verdict_cells"] and max(phone["verdict_cells"]) <= phone["viewport"] + 1, \
        f"{name}: on a phone a claims table's verdict lies beyond the screen ({max(phone['verdict_cells']):.0f} px)"
    _check_figure_numbers(name, report)
    # math, if the chapter has any, is typeset
    if 'class="math' in static_html:
        assert report["mjx"] > 0 and "<mjx-container" in dom, f"{name}: math was not typeset"
    raw = RAW_MATH.findall(text)
    assert not raw, f"{name}: untypeset math delimiters left: {raw[:5]}"
    # a screenshot that is not a blank page
    shot = tmp_path / "page.png"
    _browse(page, browser_profile, f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars")
    from PIL import Image

    with Image.open(shot) as im:
        extrema = im.convert("L").getextrema()
    assert extrema[1] - extrema[0] > 50, f"{name}: the screenshot is uniform {extrema}"


CAPTION_NUMBER = re.compile(r"^Fig\. (\d+)\.(\d+) ")  # the number Sphinx puts before a caption (numfig)
TYPED_NUMBER = re.compile(r"^\s*(—\s*)?Figs?\. \d")  # a number typed into the caption after Sphinx's


def _check_figure_numbers(name: str, report: dict) -> None:
    """Every figure carries exactly one number, rendered by Sphinx ("Fig. <chapter>.<n>", n = 1, 2, … in page
    order, in a caption-number span) and none typed into its caption; every figure is named (fig-ch<N>-…), and
    every in-page link to a figure ({numref}) points at a figure of this page and says its number."""
    chapter = CHAPTERS.index(name) + 1
    numbers = {}
    for n, caption in enumerate(report["captions"], 1):
        match = CAPTION_NUMBER.match(caption["text"])
        assert caption["numbers"] == 1 and match, \
            f"{name}: caption not numbered once by Sphinx: {caption['text'][:60]!r} ({caption['numbers']} numbers)"
        assert (int(match.group(1)), int(match.group(2))) == (chapter, n), \
            f"{name}: figure {n} of chapter {chapter} is numbered {match.group(0).strip()!r}"
        assert not TYPED_NUMBER.match(caption["text"][match.end():]), \
            f"{name}: a figure number is typed into the caption: {caption['text'][:60]!r}"
        assert caption["id"].startswith(f"fig-ch{chapter}-"), f"{name}: figure {n} has no name fig-ch{chapter}-…"
        numbers[caption["id"]] = f"{chapter}.{n}"
    for ref in report["fig_refs"]:
        assert ref["target"] in numbers, f"{name}: {ref['text']!r} links #{ref['target']}, no figure of this page"
        said = ref["text"].split()[-1].rstrip(",;:)")
        assert ref["text"].startswith("Fig.") and said.rstrip("abcdefgh") == numbers[ref["target"]], \
            f"{name}: the text says {ref['text']!r} for the figure numbered {numbers[ref['target']]}"


def _check_layout(name: str, report: dict) -> None:
    """Figures legible at the column width (none shown below 60 % of its natural width) and no table wider than
    the column, in a window 1,400 px wide."""
    for image in report["images"]:
        if image["natural"]:
            assert image["shown"] >= 0.6 * image["natural"], \
                f"{name}: a figure is shown at {image['shown']:.0f} of its {image['natural']} px ({image['alt'][:60]})"
    for table in report["table_sizes"]:
        assert table["width"] <= table["column"] + 1, \
            f"{name}: a table is {table['width']:.0f} px wide in a {table['column']:.0f} px column: {table['head'][:80]}"


@pytest.mark.parametrize("page", ["intro", "scoreboard", "plan", "reference"])
def test_browser_book_pages_fit_the_column(page, built_book, browser_profile):
    _, _, html_dir = built_book
    _check_layout(page, _probe(html_dir / "book" / f"{page}.html", browser_profile))


def test_browser_scoreboard_page(built_book, browser_profile):
    _, _, html_dir = built_book
    page = html_dir / "book" / "scoreboard.html"
    dom = _browse(page, browser_profile, "--dump-dom")
    assert "<table" in dom, "the scoreboard shows no table"
    report = _probe(page, browser_profile)
    print("scoreboard:", {k: v for k, v in report.items() if k != "text"})
    assert "Scoreboard" in report["title"]
    assert report["tables"] >= 2, "expected the verdict counts and the claims table"
    for name in CHAPTERS:
        assert name in report["text"], f"{name} missing from the rendered scoreboard"
    # every claim links to an anchor that exists in its chapter's page
    links = re.findall(r'href="(\.\./notebooks/[^"#]+\.html)#([^"]+)"', page.read_text())
    assert links, "the scoreboard links no claim to its chapter"
    for target, anchor in links:
        shown = (page.parent / target).resolve()
        assert shown.exists(), f"the scoreboard links a missing page {target}"
        assert f'id="{anchor}"' in shown.read_text(), f"the scoreboard links {target}#{anchor}, which does not exist"
    assert report["first_figure_screens"] is not None and report["first_figure_screens"] <= 2
