"""Heuristic methods, one module each; importing this package registers them."""

from . import (
    baechi,
    celeritas,
    cp_search,
    cpop,
    critical_path,
    ea,
    greedy,
    heft,
    met,
    peft,
    random_eft,
    random_search,
    sa,
    single_best,
)

__all__ = ["baechi", "celeritas", "cp_search", "cpop", "critical_path", "ea", "greedy", "heft", "met", "peft",
           "random_eft", "random_search", "sa", "single_best"]
