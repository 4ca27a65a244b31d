"""Built-in problem instances, shipped with the package.

``topcuoglu2002`` is the ten-task graph of Topcuoglu, Hariri and Wu (2002). The
``real/`` instances are real architectures (Inception-v3, ResNet-50, a BERT-base
encoder, a GNMT-style LSTM seq2seq, a ResNet-50 training step) traced op by op, at
layer and at operator granularity, on memory-tight systems; they ship as
gzip-compressed JSON (``real/*.json.gz``), made by ``benchmarks/make_real_models.py``.
The ``real/gpt*`` training steps (19k and 35k ops) are generated when loaded, by
:func:`mapsched.generators.transformer_train` with seed 0, rather than shipped. See
``docs/real-models.md``.

Examples
--------
>>> from mapsched import instances
>>> instances.names()[-1]
'topcuoglu2002'
>>> "real/resnet50-op" in instances.names()
True
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from importlib import resources

from mapsched.errors import ProblemError, shown
from mapsched.model.problem import Problem

__all__ = ["DEFAULT", "GENERATED", "REAL", "load", "names"]

DEFAULT = "topcuoglu2002"
REAL = "real"
"""The sub-folder (and name prefix) of the real-model instances."""


def _gpt_step(layers: int, system: str) -> Callable[[], Problem]:
    def make() -> Problem:
        from mapsched.generators import platform, transformer_train

        return transformer_train(layers, platform=platform(system), seed=0, name=f"gpt{layers}-step-{system}")
    return make


GENERATED: dict[str, Callable[[], Problem]] = {
    f"{REAL}/gpt{layers}-step-{system}": _gpt_step(layers, system)
    for layers in (12, 22) for system in ("cpu-t4-a100", "4-gpu-server")
}
"""Instances built when loaded: the GPT decoders' training steps of 18,951 (12 layers) and
34,711 ops (22 layers) on the two single-server presets, as ``mapsched generate
transformer-train --layers N --system S`` makes them (seed 0)."""


def _stem(name: str) -> str | None:
    for ext in (".json.gz", ".json"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return None


def _files() -> dict[str, tuple[str, ...]]:
    """Shipped instances: name -> path parts under this package."""
    root = resources.files(__name__)
    out: dict[str, tuple[str, ...]] = {}
    for folder in ((), (REAL,)):
        where = root.joinpath(*folder) if folder else root
        if not where.is_dir():
            continue
        for f in where.iterdir():
            stem = _stem(f.name)
            if stem is not None:
                out["/".join((*folder, stem))] = (*folder, f.name)
    return out


def names() -> list[str]:
    """Names of the built-in instances (the real models' with the prefix ``real/``)."""
    return sorted({*_files(), *GENERATED})


def load(name: str = DEFAULT) -> Problem:
    """Load a built-in instance by name (``topcuoglu2002``: the ten-task graph of
    Topcuoglu, Hariri and Wu, 2002, on three processors; ``real/...``: the real models)."""
    if name in GENERATED:
        return GENERATED[name]()
    files = _files()
    if name not in files:
        raise ProblemError(f"instance: unknown built-in instance {shown(name)}; expected one of {names()}")
    data = resources.files(__name__).joinpath(*files[name]).read_bytes()
    if files[name][-1].endswith(".gz"):
        data = gzip.decompress(data)
    return Problem.from_json(data.decode("utf-8"), name)
