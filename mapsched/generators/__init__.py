"""Seeded workload generators; each returns a validated :class:`~mapsched.Problem`."""

from .random_dag import random_dag

__all__ = ["random_dag"]
