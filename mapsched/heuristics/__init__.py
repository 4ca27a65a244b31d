"""Heuristic methods, one module each; importing this package registers them."""

from . import random_search, single_best

__all__ = ["random_search", "single_best"]
