"""Benchmark sweeps: suites of cases run by several methods, their rows, tables and
quality-over-time plots (``mapsched bench``)."""

from mapsched.bench.sweep import (
    BOUND,
    Case,
    Suite,
    load_suites,
    plot_quality,
    read_rows,
    results_table,
    run_suite,
    runtime_table,
)

__all__ = ["BOUND", "Case", "Suite", "load_suites", "plot_quality", "read_rows", "results_table", "run_suite",
           "runtime_table"]
