"""MILP-SPLIT (Ghannane & Abdelfattah, section IV-B): modules, and dynamic programming over them."""

from . import milp_split
from .modules import ModuleChain, detect_modules

__all__ = ["ModuleChain", "detect_modules", "milp_split"]
