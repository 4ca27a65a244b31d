"""The method machinery: the registry every method registers in, the solve context a method
runs under, interrupts and time limits, relocation costs, Dask executors and the HiGHS LP
helper."""

from mapsched._imports import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
