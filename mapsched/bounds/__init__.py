"""Proved lower bounds on the optimal makespan, independent of any method and quick to
compute. The module-chain recursion, which needs exact solves of module pieces, is
:func:`mapsched.split.chain_bound`; the relaxation of the latency model with separated
load cuts is :func:`mapsched.bounds.relaxation.relaxation_bound`; both take longer
and :func:`mapsched.split.full_bound` combines them with these. The throughput bounds
that see pipelining are in :mod:`mapsched.bounds.batched`; where transfers take turns,
:func:`~mapsched.bounds.contention.copy_load_bound` counts the copies they force."""

from mapsched.bounds.batched import batched_relaxation_bound, stage_bound, two_part_bound
from mapsched.bounds.contention import copy_load_bound
from mapsched.bounds.interval import interval_load_bound
from mapsched.bounds.load import load_bound
from mapsched.bounds.lower import Bound, lower_bound
from mapsched.bounds.memory import memory_chain_bound, memory_load_bound, transfer_path_bound
from mapsched.bounds.simple import SubsetBound, critical_path_bound, min_work, slr, work_bound

__all__ = ["Bound", "SubsetBound", "batched_relaxation_bound", "copy_load_bound", "critical_path_bound",
           "interval_load_bound",
           "load_bound", "lower_bound", "memory_chain_bound", "memory_load_bound", "min_work", "slr", "stage_bound",
           "transfer_path_bound", "two_part_bound", "work_bound"]
