"""The library's layers (nhtlib/__init__.py, book/api.md): who may import whom, no private names across modules, and
a run's cache key hashing only the code a run executes — read statically from the source (nothing is trained)."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import nhtlib.engine.source as source

PACKAGE_DIR = Path(source.__file__).resolve().parents[1]  # nhtlib/
LAYERS = ("engine", "analysis", "report", "chapters", "cli", "data", "models")

# the layer (a folder of nhtlib) -> the layers its files must never import
FORBIDDEN = {
    "engine": ("report", "chapters", "cli"),
    "data": ("report", "chapters", "cli", "models"),
    "models": ("report", "chapters", "cli", "data"),
    "analysis": ("engine", "report", "chapters", "cli"),
    "report": ("engine", "chapters", "cli"),
    "chapters": ("cli",),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(dotted: str) -> bool:
    base = PACKAGE_DIR.parent.joinpath(*dotted.split("."))
    return (base / "__init__.py").is_file() or base.with_suffix(".py").is_file()


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """Every import statement of the file, anywhere in it (functions and `if TYPE_CHECKING` blocks too): (the module
    it imports from, with relative imports resolved; the names it imports; the line)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, [a.name for a in node.names], node.lineno))
    return found


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """The nhtlib modules the file imports: for ``from X import a``, X and, when it is a module, X.a."""
    out = []
    for target, names, line in imports(path):
        if target.split(".")[0] != "nhtlib":
            continue
        out.append((target, line))
        out += [(f"{target}.{n}", line) for n in names if is_module(f"{target}.{n}")]
    return out


def files_of(layer: str) -> list[Path]:
    return sorted((PACKAGE_DIR / layer).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE_DIR).as_posix()


def test_the_layers_exist():
    for layer in LAYERS:
        assert (PACKAGE_DIR / layer / "__init__.py").is_file(), layer
        assert files_of(layer), layer


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_no_layer_above_it(layer):
    forbidden = tuple(f"nhtlib.{other}" for other in FORBIDDEN[layer])
    bad = [f"{rel(path)}:{line} imports {module}" for path in files_of(layer)
           for module, line in imported_modules(path)
           if any(module == f or module.startswith(f + ".") for f in forbidden)]
    assert not bad, f"nhtlib/{layer}/ must not import {', '.join(forbidden)}:\n" + "\n".join(bad)


def test_the_import_reader_resolves_relative_and_nested_imports(tmp_path, monkeypatch):
    # The rules above are only as good as the reader: a relative import, one inside a function and `import a.b`.
    fake = tmp_path / "nhtlib"
    (fake / "engine").mkdir(parents=True)
    for name in ("__init__.py", "engine/__init__.py", "report.py"):
        (fake / name).write_text("")
    (fake / "engine" / "x.py").write_text(
        "import os\nfrom . import y\n\ndef f():\n    from ..report import plot\n    import nhtlib.cli.main\n")
    monkeypatch.setitem(globals(), "PACKAGE_DIR", fake)  # the reader resolves names against the fake package
    found = {m for m, _ in imported_modules(fake / "engine" / "x.py")}
    assert found == {"nhtlib.engine", "nhtlib.report", "nhtlib.cli.main"}


def test_no_module_imports_a_private_name_from_another():
    bad = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for target, names, line in imports(path):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if target.split(".")[0] == "nhtlib" and private:
                bad.append(f"{rel(path)}:{line} imports {', '.join(private)} from {target}")
    assert not bad, "private names are private to their module:\n" + "\n".join(bad)


def test_a_run_executes_the_engine_data_and_models_never_the_report_chapters_or_commands():
    files = source.run_source_files()
    above = [f for f in files if f.split("/")[0] in ("report", "chapters", "cli")]
    assert not above, f"a run's key hashes code no run executes: {above}"
    assert {"engine/train.py", "engine/step.py", "engine/sweep.py", "data/__init__.py", "models/__init__.py"} <= \
        set(files)
    assert "__init__.py" not in files  # the package's face maps names lazily and runs none of them


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package, which `nhtlib.engine.source` reads instead of the real one (its hash cache cleared
    around the test)."""
    copy = tmp_path / "nhtlib"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    source.run_source_hash.cache_clear()
    monkeypatch.setattr(source, "PACKAGE_DIR", copy)
    monkeypatch.setattr(source, "FACE", copy / "__init__.py")
    yield copy
    source.run_source_hash.cache_clear()


def test_the_run_key_ignores_report_and_chapter_edits_and_follows_engine_and_metric_edits(package_copy):
    metric = ("nhtlib.analysis.metrics.features",)

    def hashes():
        source.run_source_hash.cache_clear()
        return source.run_source_hash(), source.run_source_hash(metric)

    def edit(file):
        with open(package_copy / file, "a") as f:
            f.write("\n# an edit\n")

    closure = source.module_closure(source.RUN_ROOTS)
    assert closure and all(package_copy in p.parents for p in closure)  # the copy is what is read
    assert source.closure_hash(closure) == source.run_source_hash()

    plain, with_metric = hashes()
    assert plain != with_metric
    edit("report/plots.py")
    edit("chapters/toy_norm_hierarchy.py")
    assert hashes() == (plain, with_metric)  # a plot or a claim retrains nothing

    edit("analysis/metrics/features.py")
    plain_after, with_metric_after = hashes()
    assert plain_after == plain  # runs that do not log the metric keep their key
    assert with_metric_after != with_metric  # the runs that log it are retrained

    edit("engine/train.py")
    trained_after, with_metric_trained = hashes()
    assert trained_after != plain and with_metric_trained != with_metric_after  # the loop keys every run
