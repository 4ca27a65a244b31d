"""Measurement harness: profile PyTorch models into problems and run schedules for real.

Needs the optional extra ``mapsched[torch]``.

- :func:`trace` cuts a model into tasks with ``torch.fx`` (optionally clustering
  conv-BN-activation chains and elementwise runs);
- :func:`profile` times every task on every device and batch size, measures the
  links, and returns a :class:`mapsched.Problem`, re-measuring and refusing figures
  that scatter more than a threshold (a busy machine); :func:`profile_report` also
  returns the spread of every measurement;
- :func:`measure_overheads` times what a job costs in :func:`execute` beyond its
  kernels, and a cross-device hand-off beyond the copy; :func:`profile` adds both to
  the problem's times and records them with the thread settings;
- :func:`execute` runs a schedule on the devices and measures it (under the thread
  settings the problem was profiled with);
- :func:`prepare` builds the callable each task runs, in profiling and execution
  alike: its fx module, or with ``compile="jit"`` a frozen TorchScript trace per batch
  size (:mod:`mapsched.harness.lean`); the problem records the setting;
- :func:`calibrate` runs a few schedules and fits the overhead terms to their measured
  makespans by least squares, returning the calibrated problem and the fit;
- :func:`measure_contention` times copies alone and side by side, and says which links
  carry one at a time and which devices' copies occupy them (``mapsched profile
  --contention`` writes it into the problem);
- :func:`trace_step` traces a whole training step op by op with ``make_fx`` in fake
  mode (no weights, data or memory) and costs each op with a roofline;
- :mod:`mapsched.harness.models` has example models: small ones to profile, and GPT
  decoders and a ResNet-50 on the meta device to trace.
"""

from mapsched.harness.aten import trace_step
from mapsched.harness.calibrate import CalibrationReport, calibrate
from mapsched.harness.contention import Contention, measure_contention
from mapsched.harness.devices import available, default_threads
from mapsched.harness.execute import Execution, execute, outputs_match
from mapsched.harness.graph import CoarseGraph, Segment, trace
from mapsched.harness.lean import COMPILE, prepare, recorded_compile
from mapsched.harness.overheads import check_threads, measure_overheads, thread_settings
from mapsched.harness.profile import (
    NoisyMeasurementWarning,
    Profiled,
    Spread,
    measure_links,
    profile,
    profile_report,
)

__all__ = [
    "COMPILE", "CalibrationReport", "CoarseGraph", "Contention", "Execution", "NoisyMeasurementWarning", "Profiled",
    "Segment", "Spread", "available", "calibrate", "check_threads", "default_threads", "execute",
    "measure_contention", "measure_links", "measure_overheads", "outputs_match", "prepare", "profile",
    "profile_report", "recorded_compile",
    "thread_settings", "trace", "trace_step",
]
