"""How mapsched imports: submodules on first use, and old module paths kept for one release.

Importing an old path gives the module at its new path, with a :class:`DeprecationWarning`
that names it.

mapsched 0.2 grouped its flat top level into layers (``model``, ``engine``, ``scheduling``,
...). Code that imports ``mapsched.decoder`` or ``from mapsched.problem import Problem`` keeps
working through a finder on :data:`sys.meta_path`, so the top level holds no stub modules.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType

__all__ = ["MOVED", "install", "submodules_on_first_use"]

MOVED = {
    "mapsched.arguments": "mapsched.checks",
    "mapsched.auto": "mapsched.heuristics.auto",
    "mapsched.closure": "mapsched.model.closure",
    "mapsched.coarsen": "mapsched.scheduling.coarsen",
    "mapsched.construct": "mapsched.scheduling.construct",
    "mapsched.context": "mapsched.engine.context",
    "mapsched.convert": "mapsched.model.convert",
    "mapsched.decoder": "mapsched.scheduling.decoder",
    "mapsched.distributed": "mapsched.engine.dask",
    "mapsched.feasibility": "mapsched.scheduling.feasibility",
    "mapsched.files": "mapsched.model.files",
    "mapsched.formats": "mapsched.model.formats",
    "mapsched.formulations.relaxation": "mapsched.bounds.relaxation",
    "mapsched.heuristics.cp_search": "mapsched.heuristics.critical_path_search",
    "mapsched.highs_lp": "mapsched.engine.highs",
    "mapsched.initial": "mapsched.scheduling.initial",
    "mapsched.interrupt": "mapsched.engine.interrupt",
    "mapsched.jsonio": "mapsched.model.jsonio",
    "mapsched.portfolio": "mapsched.scheduling.best_list",
    "mapsched.problem": "mapsched.model.problem",
    "mapsched.ranks": "mapsched.scheduling.ranks",
    "mapsched.registry": "mapsched.engine.registry",
    "mapsched.relocation": "mapsched.engine.relocation",
    "mapsched.schedule": "mapsched.model.schedule",
    "mapsched.simulate": "mapsched.scheduling.simulate",
    "mapsched.split.bound": "mapsched.split.chain_bounds",
    "mapsched.splits": "mapsched.model.owners",
    "mapsched.suites": "mapsched.bench.suites",
    "mapsched.symmetry": "mapsched.model.symmetry",
    "mapsched.units": "mapsched.model.scales",
    "mapsched.validate": "mapsched.model.validate",
}
"""Each old module path and the module now at its place."""


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran at its new path already."""


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder of old paths on :data:`sys.meta_path`, once."""
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.append(_OldPaths())


def submodules_on_first_use(package: str) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` for ``package`` that imports ``package.name`` on first use, so
    that ``import mapsched`` alone lets ``mapsched.model.symmetry.find_symmetry`` resolve
    without importing every solver at start-up."""

    def __getattr__(name: str) -> ModuleType:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
