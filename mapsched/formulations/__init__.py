"""Exact formulations (MILP and CP-SAT); filled in by the exact-scheduling work."""
