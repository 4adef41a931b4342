"""Which code a run executes, found from the imports themselves, and its hash: part of every run's cache key.

A run executes the training loop and what it imports (the engine, the data sets, the models, ground) and the
module of the metric it logs. `module_closure` follows every ``import`` and ``from … import`` of a module's source
(inside functions too: they run when called), resolving relative imports, and adds the ``__init__.py`` of every
package on the way (Python runs them). The package's face, ``nhtlib/__init__.py``, is left out: it only maps names to
modules lazily and runs none of them (`nhtlib.paths.lazy_attributes`). So a new metric that training logs is in the
key, while a plot, a claim threshold or a caption — code no run imports — is not, and editing it retrains nothing.

The closure is read statically (nothing is imported), so it also holds for code paths a given run does not take:
over-inclusive by design, never missing an import that is written down.
"""
from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from nhtlib.paths import PACKAGE_DIR

PACKAGE = "nhtlib"
FACE = PACKAGE_DIR / "__init__.py"  # maps names lazily, executes no part: not code a run executes
RUN_ROOTS = ("nhtlib.engine.sweep",)  # the entry point of every run: it trains through the loop and stores in the cache


def module_file(module: str) -> Path | None:
    """The source file of `module` (an ``nhtlib`` dotted name): its ``.py`` file or its package's ``__init__.py``;
    None when it is not a module of the package (e.g. an attribute imported with ``from X import name``)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _module_name(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(PACKAGE_DIR).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def imported_modules(path: Path) -> set[str]:
    """The ``nhtlib`` modules the source file `path` imports anywhere (relative imports resolved; for ``from X import
    a`` both X and, when it is a module, X.a)."""
    name, is_package = _module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if module_file(f"{target}.{a.name}") is not None)
    return found


def module_closure(roots: Iterable[str]) -> list[Path]:
    """Every source file the modules `roots` reach through their imports, with the ``__init__.py`` of each package
    on the way (the face excepted), sorted. Raises ValueError for a root that is no module of the package."""
    todo = []
    for root in roots:
        if module_file(root) is None:
            raise ValueError(f"{root!r} is not a module of {PACKAGE}")
        todo.append(root)
    seen: set[Path] = set()
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # the module and every package above it
            path = module_file(".".join(parts[:i]))
            if path is None or path == FACE or path in seen:
                continue
            seen.add(path)
            todo.extend(imported_modules(path))
    return sorted(seen)


def closure_hash(paths: Iterable[Path]) -> str:
    """sha256 over the files (path relative to the package + bytes), 16 hex digits."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=None)
def run_source_hash(extra_modules: tuple[str, ...] = ()) -> str:
    """The hash of the code a run executes: the closure of `RUN_ROOTS` and of `extra_modules` (the module of the
    metric it logs). Cached per process: the source does not change under a running process."""
    return closure_hash(module_closure((*RUN_ROOTS, *extra_modules)))


def run_source_files(extra_modules: tuple[str, ...] = ()) -> list[str]:
    """The files behind `run_source_hash` (paths relative to the package), for people and tests."""
    return [str(p.relative_to(PACKAGE_DIR)) for p in module_closure((*RUN_ROOTS, *extra_modules))]


def package_modules(subpackage: str) -> list[str]:
    """The dotted names of every module under ``nhtlib/<subpackage>/`` (e.g. 'report'), sorted."""
    folder = PACKAGE_DIR / subpackage
    return sorted(_module_name(p)[0] for p in folder.rglob("*.py"))
