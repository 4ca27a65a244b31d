"""The problem model and its files: what a problem and a schedule are, how they are read,
written and checked.

The lowest layer of mapsched: :class:`~mapsched.model.problem.Problem` (tasks, edges,
devices, links, the objective) checks itself once, as it is built;
:class:`~mapsched.model.schedule.Schedule` holds an answer; :func:`~mapsched.model.validate.validate`
checks one against the other. Everything above (the list-scheduling core, the methods, the
bounds, the CLI) takes a checked problem.
"""

from mapsched._imports import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
