"""``python -m mapsched``: the command line, where the ``mapsched`` script is not on the PATH."""

from mapsched.cli import run

run()
