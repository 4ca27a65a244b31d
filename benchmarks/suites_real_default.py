"""The ``real-models`` graphs of up to 1,000 tasks with the default (``auto``) at 60 s beside
``relax-round`` and the list schedulers (BENCHMARKS.md "Real models"):

    cd benchmarks/results && mapsched bench real-default --suites ../suites_real_default.py \
        --workers 1 --time-limit 60 -o real-default.jsonl
"""

from mapsched import instances
from mapsched.bench.suites import REAL_MODELS
from mapsched.bench.sweep import Case, Suite

SUITES = {
    "real-default": Suite(
        "real-default",
        tuple(Case(name[len("real/"):], instances.load, {"name": name}) for name in REAL_MODELS
              if "gpt" not in name),
        ("heft", "peft", "relax-round", "auto"), time_limit=60.0,
        description="the real-model graphs of up to 1,000 tasks: the default at 60 s, relax-round and the "
                    "list schedulers"),
}
