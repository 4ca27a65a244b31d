"""The method registry: every method registers under a short name with its options.

A method is a function ``fn(problem, ctx, **options) -> Schedule`` where ``ctx``
is a :class:`~mapsched.solve.SolveContext`. It returns the best schedule it
found; :func:`mapsched.solve` then fills in the bound, gap, timing and name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from mapsched import checks
from mapsched.errors import OptionError, shown

__all__ = ["Method", "Option", "get", "methods", "register"]


@dataclass(frozen=True)
class Option:
    """A method option: settable as ``solve(..., name=value)`` or ``--name value``."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    cli: bool = True  # False: Python objects (plugins, executors) that a command line cannot give
    positive: bool = False  # numbers are never negative; True: never zero either
    most: float | None = None  # the largest number accepted; a float must be finite either way
    reads: bool = False  # a file the method reads, which no command may write its output to

    def parse(self, value: Any, method: str) -> Any:
        """Convert a value (a string from the command line, or a Python value) to the option's type,
        and check a number's range (:mod:`mapsched.checks`)."""
        flag = f"--{self.name.replace('_', '-')}"
        if not self.cli and isinstance(value, str):  # a command line gives only strings
            raise OptionError(f"{self.name}: method {shown(method)} takes a Python object there, from "
                              f"solve(..., {self.name}=...), not the string {shown(value)}")
        try:
            if self.type is object:  # any Python object, passed through as given
                v = value
            elif self.type is bool and isinstance(value, str):
                if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                v = value.lower() in ("1", "true", "yes", "on")
            elif self.type in (int, float) and not isinstance(value, str):
                # A Python number, checked below as every count and number is: int() dropped a
                # fraction and took True as 1. A float that is whole is that int.
                integral = self.type is int and isinstance(value, float) and value.is_integer()
                v = int(value) if integral else value
            else:
                v = self.type(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: float(10**400)
            raise OptionError(f"{flag}: method {shown(method)} expects {self.type.__name__}, "
                              f"got {shown(value)}") from None
        if self.type is int:
            v = checks.integer(v, flag, 1 if self.positive else 0, None if self.most is None else int(self.most))
        elif self.type is float:  # nan and infinities are no setting
            v = checks.number(v, flag, 0.0, math.inf if self.most is None else self.most, above=self.positive)
        if self.choices is not None and v not in self.choices:
            raise OptionError(f"{flag}: expected one of {list(self.choices)}, got {shown(value)}")
        return v


@dataclass(frozen=True)
class Method:
    """A registered method."""

    name: str
    fn: Callable[..., Any]
    description: str
    objectives: tuple[str, ...]
    options: tuple[Option, ...] = field(default_factory=tuple)
    exact: bool = False
    initial: bool = False  # starts from ``solve(..., initial=...)`` when given
    requires: tuple[str, ...] = ()  # optional packages it imports when it runs (e.g. "torch")
    relocation: bool = False  # minimises the makespan plus ``SolveContext.relocation``

    def available(self) -> bool:
        """Whether the optional packages it needs are installed (without importing them)."""
        from importlib.util import find_spec

        return all(find_spec(name) is not None for name in self.requires)

    def parse_options(self, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``given``; unknown names are an :class:`OptionError`."""
        known = {o.name: o for o in self.options}
        out = {o.name: o.default for o in self.options}
        for key, value in given.items():
            key = key.replace("-", "_")
            if key not in known:
                valid = ", ".join(f"--{o.name.replace('_', '-')}" for o in self.options if o.cli) or "none"
                python = [o.name for o in self.options if not o.cli]
                valid += f"; from Python only: {', '.join(python)}" if python else ""
                raise OptionError(
                    f"--{key.replace('_', '-')}: method {shown(self.name)} has no such option (options: {valid})"
                )
            out[key] = known[key].parse(value, self.name)
        return out


def read_files(method: str, given: dict[str, Any]) -> list[str]:
    """The files among ``given`` options of ``method`` that it reads (``Option.reads``): inputs
    of the command, which its output must not overwrite. Unknown methods read none here."""
    _load(method)  # that method's package only
    if method not in _REGISTRY:
        return []
    reads = {o.name for o in _REGISTRY[method].options if o.reads}
    return [v for k, v in given.items() if k.replace("-", "_") in reads and isinstance(v, str) and v]


_REGISTRY: dict[str, Method] = {}


def register(
    name: str,
    description: str,
    *,
    objectives: tuple[str, ...] = ("latency", "throughput"),
    options: tuple[Option, ...] = (),
    exact: bool = False,
    initial: bool = False,
    requires: tuple[str, ...] = (),
    relocation: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator that registers a method under ``name``; ``initial``: it starts from
    ``SolveContext.initial`` when a solve gives one; ``requires`` names the optional
    packages it imports when it runs (it stays listed without them); ``relocation``: it
    minimises the makespan plus ``SolveContext.relocation`` when a solve gives one."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY:
            raise ValueError(f"method {shown(name)} is registered twice")
        _REGISTRY[name] = Method(name, fn, description, objectives, tuple(options), exact, initial,
                                 tuple(requires), relocation)
        return fn

    return wrap


def _load(name: str | None = None) -> None:
    """Import the method modules, which register their methods, on first use rather than at
    start-up; the heuristics first, so that ``heft`` loads no MILP or CP-SAT solver (nor
    ``learned`` PyTorch: its methods import it when they run)."""
    for package in ("heuristics", "split", "formulations", "learned"):
        if name in _REGISTRY:
            return
        import_module(f"mapsched.{package}")


def get(name: str) -> Method:
    """The method registered under ``name``; an :class:`OptionError` names the known ones."""
    _load(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise OptionError(f"--method: unknown method {shown(name)}; expected one of {sorted(_REGISTRY)}") from None


def methods() -> dict[str, str]:
    """Registered method names with a one-line description each."""
    _load()
    return {name: m.description for name, m in sorted(_REGISTRY.items())}


def all_methods() -> list[Method]:
    _load()
    return [m for _, m in sorted(_REGISTRY.items())]


def taking(flag: str) -> str:
    """The names of the methods whose ``flag`` (``initial``, ``relocation``) is set, for a
    refusal's message."""
    return ", ".join(m.name for m in all_methods() if getattr(m, flag))
