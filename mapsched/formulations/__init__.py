"""Exact formulations: the Pyomo MILP (HiGHS) and the CP-SAT model; importing registers ``exact``."""

from . import exact
from .common import ModelView, Plugin
from .milp import build_model, solve_model

__all__ = ["ModelView", "Plugin", "build_model", "exact", "solve_model"]
