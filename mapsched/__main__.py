"""``python -m mapsched``: the command line, where the ``mapsched`` script is not on the PATH."""

from .cli import run

run()
