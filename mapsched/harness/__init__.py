"""Measurement harness: profile PyTorch models into problems and run schedules for real.

Needs the optional extra ``mapsched[torch]``.

- :func:`trace` cuts a model into tasks with ``torch.fx`` (optionally clustering
  conv-BN-activation chains and elementwise runs);
- :func:`profile` times every task on every device and batch size, measures the
  links, and returns a :class:`mapsched.Problem`;
- :func:`execute` runs a schedule on the devices and measures it;
- :func:`trace_step` traces a whole training step op by op with ``make_fx`` in fake
  mode (no weights, data or memory) and costs each op with a roofline;
- :mod:`mapsched.harness.models` has example models: small ones to profile, and GPT
  decoders and a ResNet-50 on the meta device to trace.
"""

from .aten import trace_step
from .devices import available
from .execute import Execution, execute, outputs_match
from .graph import CoarseGraph, Segment, trace
from .profile import measure_links, profile

__all__ = [
    "CoarseGraph", "Execution", "Segment", "available", "execute", "measure_links", "outputs_match", "profile", "trace",
    "trace_step",
]
