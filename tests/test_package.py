"""nht-book as a package (issue 25): the locked environment, the declared dependencies, the `nht-book` command
installed into a fresh virtual environment, and the citation metadata.

Every check reads the files a fresh clone has (pyproject.toml, requirements.txt, requirements.lock, README.md,
CITATION.cff); the install test builds a wheel of a copy of the package (never touching the checkout) into a new
virtual environment whose only other packages are this environment's, the lock's (a .pth file points at them).
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from importlib.metadata import distribution, distributions, packages_distributions
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import nhtlib
from nhtlib.cli.program import CHECKOUT_ENV

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CHAPTERS = ("01_toy_norm_hierarchy", "02_grokking", "03_border_cifar", "04_celeba_waterbirds", "05_dlr_batchnorm",
            "06_synthesis")
# requirements.txt pins that pyproject.toml does not declare, and why: tools to build nhtlib, not to run it
BUILD_ONLY = {"setuptools"}
# distributions of an environment made from the lock that the lock does not list: nhtlib itself and the venv's pip
NOT_LOCKED = {"nhtlib", "pip"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\#]+)", re.M)
module_providers = functools.cache(packages_distributions)  # {top-level module: [distribution]}; slow, read once


# ------------------------------------------------------------------------------------------------ helpers

def requirement_pins(text: str) -> dict[str, str]:
    """{canonical name: version} of the ``name==version`` lines of a requirements file (requirements.txt or the
    lock); a line that pins nothing is not a pin."""
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


def lock_entries(text: str) -> dict[str, tuple[str, int]]:
    """{canonical name: (version, number of --hash options)} of a hash-checked lock file (uv pip compile's format:
    ``name==version \\`` followed by ``--hash=sha256:...`` continuation lines)."""
    entries: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        pin = PIN.match(block)
        if pin:
            entries[canonicalize_name(pin[1])] = (pin[2], len(re.findall(r"--hash=sha256:[0-9a-f]{64}", block)))
    return entries


def pins_not_locked(pins: dict[str, str], lock: dict[str, tuple[str, int]]) -> list[str]:
    """The pins of requirements.txt that the lock lacks, locks at another version, or locks without a hash."""
    wrong = []
    for name, version in sorted(pins.items()):
        locked, hashes = lock.get(name, (None, 0))
        if locked != version or hashes == 0:
            wrong.append(f"{name}=={version} (lock: {locked or 'absent'}, {hashes} hashes)")
    return wrong


def top_level_imports(source: str) -> set[str]:
    """The top-level module names that `source` imports absolutely, anywhere in it (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def notebook_code(path: Path) -> str:
    """The code cells of a notebook as one Python source (IPython's ``%magic`` and ``!shell`` lines left out)."""
    cells = json.loads(path.read_text())["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code" for line in "".join(cell["source"]).splitlines()]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def undeclared_imports(sources: dict[str, str], declared: set[str]) -> list[str]:
    """'<file>: <module> (<distribution>)' for each third-party import of `sources` ({file: code}) whose
    distribution is not in `declared` (canonical names); a module no installed distribution provides is reported
    as such. The standard library and nhtlib itself are not third-party."""
    providers = module_providers()
    local = {"nhtlib"} | set(sys.stdlib_module_names)
    problems = []
    for name, source in sorted(sources.items()):
        for module in sorted(top_level_imports(source) - local):
            dists = {canonicalize_name(d) for d in providers.get(module, [])}
            if not dists:
                problems.append(f"{name}: {module} (no installed distribution provides it)")
            elif not dists & declared:
                problems.append(f"{name}: {module} ({', '.join(sorted(dists))})")
    return problems


def declared_requirements() -> list[Requirement]:
    """pyproject.toml's dependencies and optional dependencies, parsed."""
    optional = [r for group in PYPROJECT["project"].get("optional-dependencies", {}).values() for r in group]
    return [Requirement(r) for r in PYPROJECT["project"]["dependencies"] + optional]


def book_sources() -> dict[str, str]:
    """{path: code} of everything the book runs: nhtlib, the Sphinx extensions, the chapter notebooks."""
    files = [*sorted((REPO / "nhtlib").rglob("*.py")), *sorted((REPO / "book" / "_ext").glob("*.py"))]
    sources = {str(p.relative_to(REPO)): p.read_text() for p in files}
    sources |= {str(p.relative_to(REPO)): notebook_code(p) for p in sorted((REPO / "notebooks").glob("*.ipynb"))}
    return sources


# ------------------------------------------------------------------------------------------ Python version

def test_requires_python_is_3_11_in_pyproject_and_readme():
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    stated = re.findall(r"Python\s*(?:≥|>=)\s*(3\.\d+)", (REPO / "README.md").read_text())
    assert stated, "README.md states no Python version (expected 'Python ≥ 3.11')"
    assert set(stated) == {"3.11"}, f"README.md states Python ≥ {', '.join(sorted(set(stated)))}; pyproject: >=3.11"
    assert sys.version_info >= (3, 11)


# ------------------------------------------------------------------------------------ declared dependencies

def test_every_import_of_the_book_is_a_declared_dependency():
    declared = {canonicalize_name(r.name) for r in declared_requirements()}
    sources = book_sources()
    assert len(sources) > 20 and any(name.startswith("notebooks/") for name in sources)
    problems = undeclared_imports(sources, declared)
    assert not problems, ("imported but not declared in pyproject.toml's dependencies (add each to pyproject.toml "
                          "with a range and to requirements.txt with a pin, then refresh the lock):\n"
                          + "\n".join(problems))


def test_the_import_check_names_an_undeclared_import():
    """The check above, on a planted fault: PyYAML imported (as ``yaml``) but not declared."""
    sources = {"nhtlib/planted.py": "import os\nimport numpy as np\n\ndef f():\n    from yaml import safe_load\n",
               "nhtlib/fine.py": "from . import planted\nimport nhtlib.paths\n"}
    assert undeclared_imports(sources, {"numpy"}) == ["nhtlib/planted.py: yaml (pyyaml)"]
    assert undeclared_imports({"x.py": "import not_a_module_anyone_ships"}, set()) == [
        "x.py: not_a_module_anyone_ships (no installed distribution provides it)"]


def distribution_of_module(dotted: str) -> str | None:
    """The canonical name of the installed distribution whose files hold module `dotted` (a namespace package such
    as ``sphinxcontrib`` is shared by many, so the module's own file decides); None when none does."""
    spec = importlib.util.find_spec(dotted)
    if spec is None or not spec.origin:
        return None
    origin = Path(spec.origin).resolve()
    for name in module_providers().get(dotted.split(".")[0], []):  # the candidates: its top level's
        files = distribution(name).files or ()
        if any(Path(distribution(name).locate_file(f)).resolve() == origin for f in files if f.name == origin.name):
            return canonicalize_name(name)
    return None


def config_extensions(config: dict) -> list[str]:
    """The Sphinx extensions _config.yml asks for on top of jupyter-book's own: ``sphinx.extra_extensions``, and
    sphinxcontrib.bibtex when it lists ``bibtex_bibfiles`` (jupyter-book then loads it)."""
    named = list(config.get("sphinx", {}).get("extra_extensions") or [])
    return named + (["sphinxcontrib.bibtex"] if config.get("bibtex_bibfiles") else [])


def test_every_sphinx_extension_of_the_book_config_is_declared():
    declared = {canonicalize_name(r.name) for r in declared_requirements()}
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    providers = {ext: distribution_of_module(ext) for ext in config_extensions(config)}
    assert providers, "_config.yml names no extension: this check would check nothing"
    undeclared = {ext: dist for ext, dist in providers.items() if dist not in declared}
    assert not undeclared, f"_config.yml's extensions from undeclared distributions (add them to pyproject.toml and " \
                           f"requirements.txt): {undeclared}"
    assert distribution_of_module("sphinxcontrib.bibtex") == "sphinxcontrib-bibtex"  # not any sphinxcontrib-*
    assert config_extensions({"bibtex_bibfiles": ["x.bib"]}) == ["sphinxcontrib.bibtex"]


def test_pyproject_ranges_and_requirements_pins_agree():
    """Each declared dependency is pinned in requirements.txt inside its range; each pin is declared (except the
    build tools)."""
    pins = requirement_pins((REPO / "requirements.txt").read_text())
    declared = {canonicalize_name(r.name): r for r in declared_requirements()}
    outside = [f"{name}=={pins.get(name)} not in {r.specifier or '(no range)'}" for name, r in sorted(declared.items())
               if name not in pins or not r.specifier or not r.specifier.contains(pins[name], prereleases=True)]
    assert not outside, "pyproject.toml and requirements.txt disagree:\n" + "\n".join(outside)
    undeclared = sorted(set(pins) - set(declared) - BUILD_ONLY)
    assert not undeclared, f"pinned in requirements.txt but not declared in pyproject.toml: {undeclared}"


# ------------------------------------------------------------------------------------------------- the lock

def test_every_requirements_pin_is_locked_with_its_version_and_a_hash():
    lock = lock_entries((REPO / "requirements.lock").read_text())
    assert len(lock) > 100 and all(hashes for _, hashes in lock.values()), "a lock entry without a --hash"
    wrong = pins_not_locked(requirement_pins((REPO / "requirements.txt").read_text()), lock)
    assert not wrong, ("requirements.txt and requirements.lock disagree (refresh the lock: README 'The environment "
                       "and its lock'):\n" + "\n".join(wrong))


def test_the_lock_check_names_a_pin_the_lock_does_not_hold():
    lock_text = ("numpy==2.4.6 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via -r requirements.txt\n"
                 "scipy==1.17.1\n")
    lock = lock_entries(lock_text)
    assert lock == {"numpy": ("2.4.6", 1), "scipy": ("1.17.1", 0)}
    assert pins_not_locked({"numpy": "2.4.6", "scipy": "1.17.1", "pandas": "3.1.1", "torch": "2.14.0"},
                           lock | {"torch": ("2.14.1", 3)}) == [
        "pandas==3.1.1 (lock: absent, 0 hashes)", "scipy==1.17.1 (lock: 1.17.1, 0 hashes)",
        "torch==2.14.0 (lock: 2.14.1, 3 hashes)"]


def test_this_environment_is_the_lock():
    """The environment the tests run in holds exactly the lock's packages at the lock's versions (and nhtlib, pip):
    what passes here is what `make venv` reproduces."""
    lock = {name: version for name, (version, _) in lock_entries((REPO / "requirements.lock").read_text()).items()}
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in distributions()}
    differ = sorted(f"{name}: installed {installed.get(name, 'no')}, locked {lock.get(name, 'no')}"
                    for name in (set(lock) | set(installed)) - NOT_LOCKED if installed.get(name) != lock.get(name))
    assert not differ, ("this environment is not the lock's (make venv installs requirements.lock; a package "
                        "installed by hand belongs in requirements.txt and the lock):\n" + "\n".join(differ))


# ----------------------------------------------------------------------------------- metadata and licence

def test_package_metadata_licence_citation_and_changelog():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["readme"] == "README.md"
    assert project["authors"] == [{"name": "The nht-book authors"}]
    assert project["scripts"] == {"nht-book": "nhtlib.cli.main:main"}
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    missing = {"cff-version", "message", "title", "authors"} - set(citation)
    assert not missing, f"CITATION.cff lacks the required keys {sorted(missing)}"
    assert citation["cff-version"] == "1.2.0" and citation["authors"]
    assert str(citation["version"]) == nhtlib.__version__ and citation["license"] == project["license"]
    cited = " ".join(str(ref.get("identifiers", "")) for ref in citation["references"])
    for arxiv in ("2603.07323", "2410.04264"):  # NHT and D_LR
        assert f"arXiv:{arxiv}" in cited, f"CITATION.cff does not reference arXiv:{arxiv}"
    assert all(ref["title"] and ref["authors"] and ref["year"] for ref in citation["references"])
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog") and "## [Unreleased]" in changelog


# ------------------------------------------------------------------------------- installed in a fresh venv

def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def installed_venv(tmp_path_factory) -> Path:
    """A new virtual environment with nhtlib installed from a wheel (not editable) built from a copy of the package,
    its dependencies this environment's (a .pth file). Returns the environment's folder."""
    root = tmp_path_factory.mktemp("package")
    source = root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "nhtlib", source / "nhtlib", ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False, symlinks=True)
    python = env_dir / "bin" / "python"
    # this environment's site-packages as a plain path (its own .pth files, e.g. the editable nhtlib, stay inactive)
    book_site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (_site_packages(python) / "the-lock-environment.pth").write_text("\n".join(sorted(book_site)) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
                    "--ignore-installed", str(source)], check=True, env=_clean_env())
    return env_dir


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", CHECKOUT_ENV, "PYTHONHOME")}


def test_the_installed_package_is_a_copy_with_the_nht_book_command(installed_venv):
    where = subprocess.run([str(installed_venv / "bin" / "python"), "-c", "import nhtlib; print(nhtlib.__file__)"],
                           capture_output=True, text=True, check=True, cwd=installed_venv, env=_clean_env())
    assert Path(where.stdout.strip()).is_relative_to(installed_venv), where.stdout  # not the checkout's (editable)
    version = subprocess.run([str(installed_venv / "bin" / "nht-book"), "--version"], capture_output=True, text=True,
                             cwd=installed_venv, env=_clean_env())
    assert version.returncode == 0 and nhtlib.__version__ in version.stdout, version.stderr


def test_nht_book_list_inside_the_checkout_lists_the_six_chapters(installed_venv):
    proc = subprocess.run([str(installed_venv / "bin" / "nht-book"), "list"], capture_output=True, text=True,
                          cwd=REPO / "notebooks", env=_clean_env())  # a folder inside the checkout
    assert proc.returncode == 0, proc.stderr
    listed = [line.split(":")[0] for line in proc.stdout.splitlines()]
    assert listed == list(CHAPTERS), proc.stdout
    assert all("scale=" in line for line in proc.stdout.splitlines())


def test_nht_book_outside_a_checkout_says_so_without_a_traceback(installed_venv, tmp_path):
    for command in (["list"], ["build", "--no-site"], ["plan", "all"]):
        proc = subprocess.run([str(installed_venv / "bin" / "nht-book"), *command], capture_output=True, text=True,
                              cwd=tmp_path, env=_clean_env())
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert "not installed from a checkout" in proc.stderr and "inside a checkout" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
    usage = subprocess.run([str(installed_venv / "bin" / "nht-book"), "--help"], capture_output=True, text=True,
                           cwd=tmp_path, env=_clean_env())
    assert usage.returncode == 0 and all(f"  {c} " in usage.stdout for c in ("build", "run", "list", "plan"))
    assert usage.stdout.startswith("usage: nht-book <command>")
