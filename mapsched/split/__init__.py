"""MILP-SPLIT (Ghannane & Abdelfattah, section IV-B): modules, dynamic programming over them,
the rolling stitching, and the lower bounds down the chain of modules."""

from mapsched.split import milp_split
from mapsched.split.chain_bounds import chain_bound, full_bound, single_input_relaxation
from mapsched.split.modules import ModuleChain, detect_modules
from mapsched.split.windows import window_bound

__all__ = ["ModuleChain", "chain_bound", "detect_modules", "full_bound", "milp_split", "single_input_relaxation",
           "window_bound"]
