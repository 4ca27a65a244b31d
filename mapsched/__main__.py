"""``python -m mapsched``: the command line, where the ``mapsched`` script is not on the PATH."""

import sys

from .cli import main

sys.exit(main())
