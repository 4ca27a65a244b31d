"""Built-in problem instances, shipped with the package.

Examples
--------
>>> from mapsched import instances
>>> instances.names()
['topcuoglu2002']
"""

from __future__ import annotations

from importlib import resources

from mapsched.errors import ProblemError, shown
from mapsched.model.problem import Problem

__all__ = ["DEFAULT", "load", "names"]

DEFAULT = "topcuoglu2002"


def names() -> list[str]:
    """Names of the built-in instances."""
    return sorted(f.name[:-5] for f in resources.files(__name__).iterdir() if f.name.endswith(".json"))


def load(name: str = DEFAULT) -> Problem:
    """Load a built-in instance by name (``topcuoglu2002``: the ten-task graph of
    Topcuoglu, Hariri and Wu, 2002, on three processors)."""
    if name not in names():
        raise ProblemError(f"instance: unknown built-in instance {shown(name)}; expected one of {names()}")
    text = resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    return Problem.from_json(text, name)
