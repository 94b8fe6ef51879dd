"""The package's import graph checked against its layers: no cycles (imports inside functions count)
and no arrow against the flow capture -> parse -> model -> render -> print; no module over
MAX_LINES lines. Prints every violation;
exit 1 if any. tests/test_layers.py runs it."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

MAX_LINES = 500
ROOT = Path(__file__).resolve().parent.parent / "placement_cli"

# Each group of modules, and the groups it may import (besides itself). Ordered from the bottom.
BASE = ("i18n", "exceptions", "messages", "devices", "model", "collector", "forked")
ALLOWED: dict[str, tuple[str, ...]] = {
    "collector": (),
    "forked": (),
    "i18n": (),
    "exceptions": ("i18n",),
    "messages": ("i18n", "exceptions"),
    "devices": ("i18n", "exceptions", "messages"),
    "model": ("i18n", "exceptions", "messages", "devices"),
    "clusterspec": BASE,
    "outputs": BASE,
    "logparse": BASE,
    "pairing": (*BASE, "logparse"),
    "compare": (*BASE, "logparse", "filters", "pairing"),
    "filters": (*BASE, "logparse"),
    "tfrules": BASE,
    "eagerjoin": (*BASE, "logparse", "filters", "tfrules"),
    "blocks": (*BASE, "tfrules"),
    "why": (*BASE, "logparse", "filters", "tfrules", "eagerjoin", "blocks"),
    "rules": (*BASE, "logparse", "filters"),
    "costs": (*BASE, "logparse"),
    "render": BASE,
    "runtime": (*BASE, "logparse", "filters", "why", "eagerjoin", "tfrules", "clusterspec", "outputs", "costs"),
    "lessons": (*BASE, "logparse", "filters", "why", "eagerjoin", "clusterspec", "outputs", "runtime", "costs"),
    "notebook": (*BASE, "logparse", "filters", "why", "eagerjoin", "tfrules", "clusterspec", "outputs", "runtime", "lessons", "render", "rules", "costs"),
    "pytest_plugin": (*BASE, "logparse", "rules", "notebook"),
    "cli": ("*",),
    "__init__": ("*",),
    "__main__": ("*",),
    "entry": ("*",),
}


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every placement_cli module `name` imports, at any depth of the file."""
    package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if not package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]
        for target in targets:
            if not target.startswith("placement_cli"):
                continue
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                found.add(target)
    # "from placement_cli.x import y" also names the package placement_cli.x: keep the most precise
    return {t for t in found if not any(o.startswith(t + ".") for o in found) or t.count(".") > 1} - {"placement_cli"}


def group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))  # deep import chains; put back after (a test process shares it)
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def violations() -> list[str]:
    known = modules()
    graph = defaultdict(set)
    for name, path in known.items():
        graph[name] = imports(name, path, known)
    problems = [f"cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    for source in sorted(graph):
        allowed = ALLOWED.get(group(source))
        if allowed is None:
            problems.append(f"{source}: in no layer (add it to tools/layers.py ALLOWED)")
            continue
        for target in sorted(graph[source]):
            if "*" in allowed or group(target) == group(source) or group(target) in allowed:
                continue
            problems.append(f"{source} imports {target}: against the flow")
    for name, path in sorted(known.items()):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            problems.append(f"{name}: {lines} lines (at most {MAX_LINES})")
    return problems


def main() -> int:
    problems = violations()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
