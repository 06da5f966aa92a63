"""A contract type for import-linter that its built-in ones do not express.

``acyclic_modules``: no module of the root package reaches itself through the imports of
others, counting imports made only for type checking. Import-linter's ``acyclic_siblings``
compares siblings of one package; this looks at modules, across packages too.

pyproject.toml registers it (``[tool.importlinter] contract_types``); ``make lint`` runs
``lint-imports`` over the tree that ``tools/link_tree.py`` builds.
"""

from __future__ import annotations

from typing import cast

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain.contract import Contract, ContractCheck


def _within(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


class AcyclicModulesContract(Contract):
    type_name = "acyclic_modules"

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        roots = set(cast(list[str], self.session_options["root_packages"]))
        modules = sorted(m for m in graph.modules if _within(m, roots))
        cycles = [c for c in _strongly_connected(graph, modules) if len(c) > 1]
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(f"{len(cycle)} modules import each other:", bold=False)
            output.new_line()
            for module in cycle:
                output.indent_cursor()
                output.print(module)
            output.new_line()


def _strongly_connected(graph: ImportGraph, modules: list[str]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on long import chains)."""
    members = set(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start) & members)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    imported = graph.find_modules_directly_imported_by(nxt) & members
                    work.append((nxt, iter(sorted(imported))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found
