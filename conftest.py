import importlib.util

# The harness needs the optional extra mapsched[torch]; without it, its doctests
# cannot even be imported. tests/test_harness.py skips itself the same way.
collect_ignore_glob = [] if importlib.util.find_spec("torch") else ["mapsched/harness/*"]
