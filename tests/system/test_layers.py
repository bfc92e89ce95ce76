"""The package's layers import only downward (docs/architecture.md): core → Lightning
and data → the shared training path → the benchmark → commands."""

from __future__ import annotations

import ast
from pathlib import Path

import bertlab

PACKAGE = Path(bertlab.__file__).parent
LAYERS = {  # module or folder → layer; a higher layer may import a lower or the same one
    "errors": 0, "recipe_files": 0, "value_rules": 0, "argument_checks": 0, "stats": 1, "ner_metrics": 1, "squad_metrics": 1, "span_decoding": 1, "config": 1, "losses": 1, "tokenizer": 1, "tokenizer_stages": 2, "allocator": 1,
    "atomic_files": 0, "checkpoint": 2, "tables": 2,
    "model": 2, "metrics": 2, "weight_selection": 2,
    "data": 3, "teacher": 3, "lit": 3, "inference": 4, "token_inference": 4, "qa_inference": 4, "interpret": 4, "training": 5, "bench": 6, "commands": 7,
    "cli": 7, "__main__": 8, "__init__": 3,
}


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def is_bertlab(module: str) -> bool:
    return module == "bertlab" or module.startswith("bertlab.")  # not an export's bertlab_model (remote_code)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and is_bertlab(node.module):
            found |= {f"{node.module}.{alias.name}" if node.module == "bertlab" else node.module for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if is_bertlab(alias.name)}
    return found


def modules() -> dict[str, Path]:
    return {".".join(("bertlab", *path.relative_to(PACKAGE).with_suffix("").parts)): path
            for path in PACKAGE.rglob("*.py")}


def test_no_module_imports_a_higher_layer():
    upward = [f"{name} imports {imported}" for name, path in modules().items() for imported in imports_of(path)
              if imported != "bertlab" and layer(imported) > layer(name)]
    assert upward == []


def test_only_the_command_line_imports_the_commands():
    importers = sorted(name for name, path in modules().items()
                       if any(imported.startswith("bertlab.commands") for imported in imports_of(path))
                       and not name.startswith("bertlab.commands") and name != "bertlab.cli")
    assert importers == []


def imported_modules(path: Path, names: set[str]) -> set[str]:
    """The bertlab modules `path` imports, wherever the import stands (under `if TYPE_CHECKING:` and inside
    functions too): `from bertlab.x import y` names the module bertlab.x.y where there is one, else bertlab.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and is_bertlab(node.module):
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in names else node.module
                      for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if is_bertlab(alias.name)}
    return found


def test_no_import_cycle():
    """Not even through `if TYPE_CHECKING:`: a module's imports form a tree of the modules below it."""
    paths = {name.removesuffix(".__init__"): path for name, path in modules().items()}
    graph = {name: imported_modules(path, set(paths)) & set(paths) for name, path in paths.items()}
    cycles, done = [], set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycles.append(" → ".join(trail[trail.index(name):] + [name]))
        elif name not in done:
            for imported in sorted(graph[name]):
                visit(imported, trail + [name])
            done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert cycles == []


def test_a_cycle_is_found_through_type_checking_imports(tmp_path):
    """The walk above reads imports under `if TYPE_CHECKING:`, where the modules once met in a cycle."""
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bertlab.b import B\n")
    assert imported_modules(tmp_path / "a.py", {"bertlab.b"}) == {"bertlab.b"}
