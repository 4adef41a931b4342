"""The numbers given away and the provenance box telling the truth (nhtlib.report.exports, nhtlib.report.provenance):
run tables and the claims zip from a tiny hand-made cache (no training), deterministic to the byte; the runs'
environments, old cache entries included; the box's environments, parameters and re-run command; and every hostile
value escaped, checked on the HTML that MyST's own parser makes of the box."""
from __future__ import annotations

import io
import json
import os
import re
import shlex
import zipfile
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from nhtlib.cli.runner import parse_value
from nhtlib.engine.cache import RunCache
from nhtlib.paths import final_chapter_dir
from nhtlib.report import claims as claims_module
from nhtlib.report import exports, provenance

CONFIG = {"kind": "RunConfig", "task": {"kind": "ToyTask", "n": 64}, "model": {"kind": "MLP", "sizes": [8, 8]},
          "train": {"kind": "TrainConfig", "lr": 0.1, "weight_decay": 0.01}, "seed": 0}
H200 = {"python": "3.11.7", "numpy": "2.1.0", "torch": "2.5.1", "cuda": "12.4", "cudnn": 90100,
        "device": "cuda:0", "device_name": "NVIDIA H200"}
HOSTILE = "<img src=x onerror=alert(1)> {ref}`pwned <x>` {raw} $x$ a|b [link](javascript:alert(1)) **fake**"


def logged(steps: int, seed: int) -> pd.DataFrame:
    """A run's logged table: a loss every step, a test accuracy only at some steps (NaN between), a text column."""
    step = np.arange(steps) * 10
    acc = np.where(step % 20 == 0, 0.5 + 0.1 * np.arange(steps), np.nan)
    return pd.DataFrame({"step": step, "loss": 1.0 / (1 + step + seed), "test_acc": acc,
                         "phase": ["warm" if s < 20 else "main" for s in step]})


def save_run(cache: RunCache, key: str, seed: int, steps: int, **kw) -> pd.DataFrame:
    table = logged(steps, seed)
    config = {**CONFIG, "seed": seed, "train": {**CONFIG["train"], "lr": 0.1 * (seed + 1)}}
    cache.save(key, table, config, device=kw.pop("device", "cpu"), wall_time_s=1.25 + seed, **kw)
    return table


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NHT_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("NHT_CACHE", raising=False)
    return RunCache()


def test_write_tables_gives_every_logged_row_and_a_summary_deterministically(cache, tmp_path):
    first, second = save_run(cache, "run-b", 1, 3), save_run(cache, "run-a", 0, 4)
    folder = tmp_path / "chapter"
    written = exports.write_tables(folder, ["run-b", "run-a", "run-b", "not-in-cache"], RunCache())
    assert written == [(folder / "tables" / name).resolve() for name in ("runs.parquet", "runs_summary.csv")]
    long = pd.read_parquet(written[0])
    assert list(long.key) == ["run-a"] * 4 + ["run-b"] * 3  # sorted by key, each run's rows in order
    assert list(long.columns[:2]) == ["key", "config.kind"]
    assert {"config.train.lr", "config.task.n", "config.seed", "config.model.sizes", "step", "loss", "test_acc",
            "phase"} <= set(long.columns)
    assert long.loc[long.key == "run-b", "config.train.lr"].tolist() == [0.2] * 3
    assert long["config.model.sizes"].iloc[0] == "[8, 8]"  # a list, as its JSON text
    pd.testing.assert_frame_equal(long.loc[long.key == "run-b", list(first.columns)].reset_index(drop=True), first,
                                  check_dtype=False)
    summary = pd.read_csv(written[1], dtype=str, keep_default_na=False)  # the text as written
    assert list(summary.key) == ["not-in-cache", "run-a", "run-b"]
    by_key = summary.set_index("key")
    assert by_key.loc["run-a", "rows"] == "4" and by_key.loc["run-b", "rows"] == "3"
    assert by_key.loc["run-a", "cached"] == "True" and by_key.loc["not-in-cache", "cached"] == "False"
    assert float(by_key.loc["run-b", "wall_time_s"]) == 2.25
    assert float(by_key.loc["run-a", "last.loss"]) == second.loss.iloc[-1]
    # the last *logged* value: run-a's last test accuracy was logged at step 20, the rows after it have none
    assert float(by_key.loc["run-a", "last.test_acc"]) == second.test_acc.dropna().iloc[-1]
    assert by_key.loc["run-a", "config.seed"] == "0" and by_key.loc["run-a", "last.step"] == "30"  # integers stay so
    assert "last.phase" not in summary.columns  # only numeric columns have a last value
    before = [p.read_bytes() for p in written]
    again = exports.write_tables(folder, ["not-in-cache", "run-a", "run-b"], RunCache())  # other order, same runs
    assert [p.read_bytes() for p in again] == before


def test_write_tables_refuses_a_logged_key_column_and_writes_nothing_without_runs(cache, tmp_path):
    cache.save("odd", pd.DataFrame({"step": [0], "key": ["x"]}), CONFIG, device="cpu", wall_time_s=0.1)
    with pytest.raises(ValueError, match="column 'key'"):
        exports.write_tables(tmp_path, ["odd"], RunCache())
    stale = tmp_path / "tables" / "runs.parquet"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"from an earlier page")
    assert exports.write_tables(tmp_path, [], RunCache()) == [] and not stale.exists()


def test_run_environments_counts_each_environment_and_falls_back_for_old_entries(cache):
    for i in range(3):
        save_run(cache, f"gpu-{i}", i, 2, extra={"environment": H200})
    save_run(cache, "old", 0, 2)
    meta = cache.meta("old")  # rewritten as an entry from before environments were recorded, trained on a GPU
    meta.pop("environment", None)
    meta["device"] = "cuda"
    (cache.runs / "old.json").write_text(json.dumps(meta))
    environments = exports.run_environments(["gpu-2", "old", "gpu-0", "gpu-1", "gone", "gpu-0"], RunCache())
    assert [e["runs"] for e in environments] == [3, 1, 1]  # every distinct key counted once
    assert environments[0] == {**H200, "runs": 3}
    old = next(e for e in environments if e["device"] == "cuda")
    assert old["torch"] == meta["torch_version"] and old["python"] == old["cuda"] == "unknown"
    gone = next(e for e in environments if e["device"] == "unknown")
    assert set(gone.values()) == {"unknown", 1}
    text = provenance.environment_text(environments[0])
    assert text == ("device cuda:0 (NVIDIA H200), torch 2.5.1, Python 3.11.7, numpy 2.1.0, CUDA 12.4, cuDNN 90100 "
                    "(3 runs)")
    assert "CUDA —, cuDNN —" in provenance.environment_text({**H200, "cuda": None, "cudnn": None})


def test_claims_zip_holds_every_chapters_claims_deterministically(cache, tmp_path):
    for chapter, rows in (("02_grokking", "id,verdict\nP1,partly\n"),
                          ("01_toy_norm_hierarchy", "id,verdict\nP1,reproduced\n")):
        folder = final_chapter_dir(chapter, "smoke")
        folder.mkdir(parents=True)
        (folder / "claims.csv").write_text(rows)
    other_seed = final_chapter_dir("01_toy_norm_hierarchy", "smoke", seed=3)
    other_seed.mkdir(parents=True)
    (other_seed / "claims.csv").write_text("id,verdict\nP1,not reproduced\n")
    target = exports.claims_zip("smoke", tmp_path / "claims.zip")
    first = target.read_bytes()
    os.utime(final_chapter_dir("01_toy_norm_hierarchy", "smoke") / "claims.csv", (1e9, 1e9))  # another mtime ...
    again = exports.claims_zip("smoke", tmp_path / "again.zip").read_bytes()
    assert again == first == exports.claims_zip_bytes("smoke")  # ... the same zip
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        assert archive.namelist() == ["claims-smoke/01_toy_norm_hierarchy/claims.csv",
                                      "claims-smoke/02_grokking/claims.csv"]
        own = archive.read("claims-smoke/01_toy_norm_hierarchy/claims.csv")
        assert own == b"id,verdict\nP1,reproduced\n"  # the book's, not seed 3's
    assert exports.claims_zip_link("smoke") == (
        "{download}`every claim at scale smoke, one claims.csv per chapter (zip) <claims-smoke.zip>`")


# The box ---------------------------------------------------------------------------------------------------------

def record(**changes):
    base = {"chapter": "03_border_cifar", "scale": "cpu", "device": "cuda (NVIDIA H200)", "torch_version": "2.5.1",
            "git_commit": "0123456789abcdef", "nhtlib_source_hash": "feed", "seeds": [0, 1, 2], "runs": 30,
            "runs_trained": 12, "runs_cached": 18, "wall_time_s": 61.2, "train_time_s": 50.0,
            "finished_at": "2026-12-01T18:00",
            "run_environments": [{**H200, "runs": 20}, {**H200, "device": "cpu", "device_name": "AMD EPYC 7B13",
                                                        "cuda": None, "cudnn": None, "runs": 10}],
            "non_default_parameters": {"seed": 3, "lr": 0.05, "fast": True, "note": "it's `odd` $5 | <b>"}}
    return {**base, **changes}


def rerun_parameters(box: str) -> dict:
    """The parameters of the box's re-run command, as the runner's command line reads them back."""
    match = re.search(r"re-run it: (`+)(.+?)\1(?!`)", box)
    words = shlex.split(match.group(2).strip())
    assert words[:5] == [".venv/bin/python", "-m", "nhtlib", "run", "03_border_cifar"]
    flags, pairs = words[5::3], list(zip(words[6::3], words[7::3]))
    assert set(flags) == {"-p"} and len(words) == 5 + 3 * len(pairs)
    return {name: parse_value(value) for name, value in pairs}


def test_box_shows_the_runs_environments_parameters_and_a_rerun_that_round_trips():
    box = provenance.box_markdown(record(), files=["claims.csv", "tables/runs.parquet", "figures/lambda-sweep.svg",
                                                   "figures/lambda-sweep.png"])
    assert ("**runs trained on** device cuda:0 (NVIDIA H200), torch 2.5.1, Python 3.11.7, numpy 2.1.0, CUDA 12.4, "
            "cuDNN 90100 (20 runs); device cpu (AMD EPYC 7B13), torch 2.5.1") in box
    assert "CUDA —, cuDNN — (10 runs)" in box
    assert "**notebook executed on** device cuda (NVIDIA H200), torch 2.5.1" in box  # the page's process, apart
    assert "**runs** 30 (12 trained for this page, 18 from the cache)" in box
    assert "**parameters** fast = True, lr = 0.05, note = " in box and "seed = 3" in box
    assert rerun_parameters(box) == {"scale": "cpu", **record()["non_default_parameters"]}
    assert "{download}`claims.csv <03_border_cifar_files/claims.csv>`" in box
    assert "{download}`runs.parquet <03_border_cifar_files/tables/runs.parquet>`" in box
    assert ("figures: lambda-sweep ({download}`svg <03_border_cifar_files/figures/lambda-sweep.svg>`, "
            "{download}`png <03_border_cifar_files/figures/lambda-sweep.png>`)") in box
    # a page made on a CPU re-runs on one; an old record without the new fields still makes a box
    old = {k: v for k, v in record(device="cpu (X, 2 threads)").items()
           if k not in ("run_environments", "non_default_parameters", "runs_cached")}
    old_box = provenance.box_markdown({**old, "parameters": {"seed": 3}})
    assert rerun_parameters(old_box) == {"scale": "cpu", "seed": 3, "device": "cpu"}
    assert "**runs trained on** not recorded" in old_box and "18 from the cache" in old_box


def test_the_box_links_the_files_of_its_folder(tmp_path):
    for rel in ("claims.csv", "tables/runs_summary.csv", "figures/b.png", "figures/a.svg", "figures/a.png",
                "executed.ipynb", "tables/other.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert provenance.linked_files(tmp_path) == ["claims.csv", "tables/runs_summary.csv", "figures/a.png",
                                                 "figures/a.svg", "figures/b.png"]
    manifest = {rel: "sha" for rel in ("executed.ipynb", "claims.csv", "figures/a.svg")}
    box = provenance.box_markdown(record(files=manifest))  # without `files`: the record's manifest, filtered
    assert "<03_border_cifar_files/claims.csv>" in box and "<03_border_cifar_files/figures/a.svg>" in box
    assert "executed.ipynb" not in box


class _Page(HTMLParser):
    """The tags (with attributes) and the text of an HTML fragment."""

    def __init__(self, html_text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []
        self.feed(html_text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def myst_html(markdown: str) -> _Page:
    """What MyST's parser (the book's: colon fences, dollar math) makes of `markdown`, as HTML."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    parser = create_md_parser(MdParserConfig(enable_extensions={"colon_fence", "dollarmath"}), RendererHTML)
    return _Page(parser.render(markdown))


def box_body(box: str) -> str:
    """The box without its dropdown fence (MyST parses a directive's content as Markdown on its own)."""
    lines = box.splitlines()
    assert lines[0].startswith(":::{dropdown}") and lines[-1] == ":::"
    assert not [line for line in lines[1:-1] if line.lstrip().startswith(":::")], "the box was closed early"
    return "\n".join(lines[2:-1])


def test_box_escapes_hostile_parameters_statements_and_devices():
    breakout = "x\n:::\n\n<script>alert(2)</script>\n\n:::{dropdown} more"
    claims = pd.DataFrame({"id": ["P1", "{ref}`P2 <x>`"], "verdict": ["reproduced", "<i>reproduced</i>"],
                           "statement": [HOSTILE, "fine"]})
    hostile = record(non_default_parameters={"note": HOSTILE, "escape": breakout}, scale="cpu",
                     device=HOSTILE, finished_at=HOSTILE,
                     run_environments=[{**H200, "device_name": HOSTILE, "runs": 1}])
    box = provenance.box_markdown(hostile, claims, sections={"P1": "sec-1", "{ref}`P2 <x>`": "sec-2"},
                                  files=["claims.csv", "figures/<img src=x>.svg"])
    page = myst_html(box_body(box))
    tags = [tag for tag, _ in page.tags]
    assert "img" not in tags and "script" not in tags and "i" not in tags and "a" not in tags
    assert not any(attrs.get("class", "").startswith("math") for _, attrs in page.tags), "$x$ became math"
    roles = [attrs for tag, attrs in page.tags if tag == "code" and "role" in attrs.get("class", "")]
    intended = box_body(box).count("{download}`") + box_body(box).count("{ref}`P1 <sec-1>`")
    assert len(roles) == intended == 2  # claims.csv and P1's section; no hostile id, file or value made a role
    text = "".join(page.text)
    assert text.count(HOSTILE) >= 4  # parameter, device, date, statement: shown as the text they are
    assert "{ref}`P2 <x>`" in text and "<i>reproduced</i>" in text and "<img src=x>" in text
    title = box.splitlines()[0]
    assert "<" not in title


def test_escaping_functions_render_as_the_text_they_escape():
    texts = [HOSTILE, "1. not a list", "# not a heading", "- not an item", "(label)=", "back\\slash \\$ &amp;",
             "line\nbreak\r\nand\u2028more", "`` code ``"]
    for value in texts:
        page = myst_html(claims_module.markdown_text(value))
        assert [tag for tag, _ in page.tags] == ["p"], (value, page.tags)
        assert "".join(page.text).strip() == claims_module.one_line(value)
        cell = myst_html(f"| a |\n|---|\n| {claims_module.markdown_text(value)} |")
        assert [tag for tag, _ in cell.tags].count("td") == 1, value  # one cell: a "|" does not split it
    code = myst_html(claims_module.markdown_code("a ``b`` `c` <d> {e}"))
    assert [tag for tag, _ in code.tags] == ["p", "code"] and "".join(code.text).strip() == "a ``b`` `c` <d> {e}"
    assert claims_module.markdown_role("ref", "P1", "sec-1") == "{ref}`P1 <sec-1>`"
    assert claims_module.markdown_role("ref", "P`1", "sec-1") == "P\\`1"  # no link rather than a broken role
    assert claims_module.markdown_role("doc", "P1", "x> <y") == "P1"
    assert claims_module.html_text('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"


def test_a_section_is_found_by_its_escaped_claim_id(tmp_path):
    import nbformat

    from nhtlib.report.claims import Claim, verdict_markdown
    from nhtlib.report.verdicts import AtLeast, ClaimSpec, Estimate

    spec = ClaimSpec("W_P1", "a claim", "1 [paper]", "NHT", AtLeast("x", 0.5))
    row = Claim(spec, lambda a: Estimate(0.9, 0.8, 1.0, 3)).judge(None)
    shown = nbformat.v4.new_code_cell("claims.show('W_P1')")
    shown.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": verdict_markdown(row)})]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T\n\n## 1.1 A section"), shown]
    path = tmp_path / "c.ipynb"
    nbformat.write(nb, str(path))
    assert verdict_markdown(row).startswith("**W\\_P1**")  # escaped on the page ...
    assert provenance.claim_sections(path) == {"W_P1": (0, "## 1.1 A section")}  # ... and found under its own id


def test_cpu_model_reads_the_model_name_and_falls_back(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n")
    assert provenance.cpu_model(info) == "AMD EPYC 7B13"
    info.write_text("processor\t: 0\n")  # no model name: platform's answer, never empty
    assert provenance.cpu_model(info) and provenance.cpu_model(tmp_path / "absent")
    assert provenance.device_description("cpu").startswith(f"cpu ({provenance.cpu_model()}, ")
