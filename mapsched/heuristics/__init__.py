"""Heuristic methods, one module each; importing this package registers them."""

from mapsched.heuristics import (
    auto,  # the default, over the heuristics above
    baechi,
    celeritas,
    cpop,
    critical_path,
    critical_path_search,
    ea,
    greedy,
    heft,
    lns,
    met,
    peft,
    random_eft,
    random_search,
    relax_round,
    sa,
    single_best,
)

__all__ = ["auto", "baechi", "celeritas", "cpop", "critical_path", "critical_path_search",
           "ea", "greedy", "heft", "lns", "met", "peft",
           "random_eft", "random_search", "relax_round", "sa", "single_best"]
