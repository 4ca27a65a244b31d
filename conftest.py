import importlib.util

# The harness and the learned methods' torch modules need the optional extra
# mapsched[torch]; without it, their doctests cannot even be imported.
# tests/harness/test_harness.py and tests/learned/test_doppler.py skip themselves the same way.
collect_ignore_glob = [] if importlib.util.find_spec("torch") else ["mapsched/harness/*", "mapsched/learned/[!_]*.py"]
