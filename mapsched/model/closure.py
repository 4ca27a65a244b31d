"""The transitive closure of the task graph, shared by every formulation.

Pairs of tasks that a path orders never run at the same time, so exact models
need no-overlap constraints only for the pairs left unordered.

Examples
--------
>>> from mapsched import instances
>>> from mapsched.model.closure import Closure
>>> c = Closure(instances.load("topcuoglu2002"))
>>> c.ordered(0, 9), c.ordered(1, 2)
(True, False)
"""

from __future__ import annotations

import numpy as np

from mapsched.model.problem import Problem

__all__ = ["Closure"]


class Closure:
    """Reachability between tasks, as one Python-int bit set per task.

    ``reach[i]`` has bit j set when a path leads from i to j (i itself excluded).

    Notes
    -----
    Built in reverse topological order with one big-integer OR per edge: O(E n / w)
    word operations for machine words of w bits.
    """

    def __init__(self, problem: Problem) -> None:
        n = problem.n
        reach = [0] * n
        for i in reversed(problem.topo.tolist()):
            r = 0
            for j in problem.succ[i]:
                r |= reach[j] | (1 << j)
            reach[i] = r
        self.n = n
        self.reach = reach

    def reaches(self, i: int, j: int) -> bool:
        """Whether a path leads from task i to task j."""
        return bool(self.reach[i] >> j & 1)

    def ordered(self, i: int, j: int) -> bool:
        """Whether a path orders i and j, either way."""
        return self.reaches(i, j) or self.reaches(j, i)

    def descendants(self, i: int) -> np.ndarray:
        """Indices of the tasks a path leads to from task i, ascending."""
        raw = self.reach[i].to_bytes((self.n + 7) // 8, "little")
        return np.flatnonzero(np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little"))

    def matrix(self) -> np.ndarray:
        """Boolean reachability matrix, shape (n, n): eight times the bit sets' n^2 / 8 bytes."""
        nbytes = (self.n + 7) // 8
        raw = b"".join(r.to_bytes(nbytes, "little") for r in self.reach)
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(self.n, nbytes),
                             axis=1, bitorder="little")
        return bits[:, : self.n].astype(bool)

    def unordered_pairs(self) -> np.ndarray:
        """Pairs ``i < j`` that no path orders, shape (k, 2): the only ones that may overlap."""
        r = self.matrix()
        free = ~(r | r.T)
        return np.argwhere(np.triu(free, k=1))
