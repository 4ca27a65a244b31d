"""The list-scheduling core: the decoder that turns a mapping and an order into a schedule,
task ranks, list construction and repair, the work-conserving simulator, initial
placements, the best-of-list portfolio, coarsening for large graphs, and the resources on
which transfers take turns where a problem declares contention."""

from mapsched._imports import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
