"""The layout rules of ARCHITECTURE.md, checked on the source: dependencies point one way
(pipeline -> transforms -> bpe), no two modules import each other, folders stay small
enough to read, and benchmarks import no tests."""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("bpe", "transforms", "pipeline")
MAX_MODULES_PER_FOLDER = 15
MAX_SUPPORT_LINES = 300


def _modules() -> dict[str, pathlib.Path]:
    """Every product module, by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imported(name: str, path: pathlib.Path) -> set[str]:
    """The dotted names a module imports (type-only imports included), absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    """Module -> the product modules it imports (a name resolved to its module; a package's
    ``__init__`` only re-exports, so importing through it counts for no edge)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in _imported(name, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and modules[target].name != "__init__.py":
                edges.add(target)
        graph[name] = edges
    return graph


def test_no_two_modules_import_each_other():
    graph = _graph()
    circles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if a in graph.get(b, ())})
    assert not circles, f"modules that import each other: {circles}"


def test_dependencies_point_from_pipeline_to_transforms_to_bpe():
    allowed = {"bpe": ("bpe",), "transforms": ("bpe", "transforms"), "pipeline": PACKAGES}
    wrong = []
    for name, path in _modules().items():
        top = name.split(".")[0]
        for target in _imported(name, path):
            head = target.split(".")[0]
            if head in PACKAGES and head not in allowed[top]:
                wrong.append(f"{name} imports {target}")
            if top == "bpe" and head == "apache_beam":
                wrong.append(f"{name} imports Beam")
    assert not wrong


def test_no_folder_holds_more_than_about_fifteen_modules():
    for package in PACKAGES:
        for folder in [REPO / package, *(p for p in (REPO / package).rglob("*") if p.is_dir())]:
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= MAX_MODULES_PER_FOLDER, f"{folder.relative_to(REPO)}: {len(modules)} modules"


def test_test_support_modules_are_small():
    for path in (REPO / "tests" / "support").glob("*.py"):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= MAX_SUPPORT_LINES, f"{path.relative_to(REPO)}: {lines} lines"


def test_benchmarks_import_no_tests():
    for path in (REPO / "benchmarks").glob("*.py"):
        imported = _imported(f"benchmarks.{path.stem}", path)
        assert not [n for n in imported if n == "tests" or n.startswith("tests.")], path.name


def test_the_checks_see_a_circle_and_a_wrong_direction(tmp_path, monkeypatch):
    """The rules above fail on a tree that breaks them (so they cannot pass vacuously)."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "bpe" / "a.py").write_text("from bpe import b\nimport apache_beam\n")
    (tmp_path / "bpe" / "b.py").write_text("from bpe.a import x\nfrom transforms import c\n")
    (tmp_path / "transforms" / "c.py").write_text("")
    monkeypatch.setattr(__import__(__name__, fromlist=["REPO"]), "REPO", tmp_path)
    graph = _graph()
    assert "bpe.b" in graph["bpe.a"] and "bpe.a" in graph["bpe.b"]
    imported = _imported("bpe.b", tmp_path / "bpe" / "b.py")
    assert "transforms.c" in imported
