"""Regenerate the real-model instances of ``mapsched.instances`` (``real/*.json.gz``).

Each instance is one pass of a real architecture, traced op by op with ``make_fx`` in
fake mode (shapes only: no weights, data or memory) and costed with the roofline of
``docs/cost-model.md`` (:func:`mapsched.generators.training.op_problem`), on a
memory-tight system: a few small accelerators and CPU cores that hold everything, every
transfer staged through host memory at 2 GiB/s. ``docs/real-models.md`` describes every
instance and prints their table (``--table``).

    pip install torchvision==0.28.0   # only for this script; mapsched does not depend on it
    python benchmarks/make_real_models.py [--out mapsched/instances/real] [--only NAME ...] [--table]

Models (batch sizes in ``MODELS``):

- ``inception_v3`` and ``resnet50``: torchvision's, in eval mode (inference);
- ``bert``: a BERT-base encoder (hidden 768, 12 heads, MLP 3072, 12 layers, vocabulary
  30,522, sequences of 128 tokens) written below in plain torch;
- ``gnmt``: a GNMT-style LSTM seq2seq (hidden 1024, vocabulary 32,000; 4 encoder layers,
  the first bidirectional, residual connections from the third; 4 decoder layers with
  additive attention over the encoder's outputs, fed to the upper layers), unrolled over
  6 source and 6 target steps, written below in plain torch;
- ``resnet50_train``: one training step of torchvision's ResNet-50 (forward, cross-entropy,
  backward, SGD), traced by :func:`mapsched.harness.aten.step_graph`.

Granularity: ``op``, one task per aten op (``getitem`` folded into its producer, as
:func:`mapsched.harness.aten.step_ops` does); ``layer``, the ops of each call of a layer
module (the outermost module of the call stack whose class is one of the model's layer
types, else the innermost module) contracted into one task. Layers are cut into runs of
ops that are consecutive in the trace, a topological order, so the layer graph is acyclic;
a run of views alone joins the run before it. A layer's time on a device is the sum of its
ops', its memory the sum of theirs (so a mapping of layers needs exactly the memory of
the same mapping of their ops), and an edge between two layers carries each tensor that
crosses once.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import math
import os
import sys
import time
import types

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

from mapsched.generators.costs import DeviceProfile, Platform
from mapsched.generators.training import Op, op_problem
from mapsched.harness.aten import step_graph, step_ops
from mapsched.model.problem import Edge, Link, Problem, Task

GIB = 2**30
HOST_BANDWIDTH = 2 * GIB
"""Bytes per second of every transfer: staged through host memory."""
HOST_LATENCY_MS = 0.01
CPU_SLOWDOWN = 7.1 * 8
"""A CPU core: the ``cpu-t4-a100`` preset's Xeon (7.1 times an A100's time) taken as 8 cores."""
ACC_SLOWDOWN = 1.26
"""An accelerator: the preset's T4 (1.26 times an A100's time), with little memory."""
CPU_MEMORY = 64e9
"""Each CPU core may hold the whole model (the host's memory, as the preset's CPU has)."""
ACC_SHARE = 0.6
"""The accelerators together hold this share of the model's memory (weights plus activations)."""
OUT = os.path.normpath(os.path.join(os.path.dirname(__file__), os.pardir, "mapsched", "instances", "real"))


# ------------------------------------------------------------------ torchvision
def torchvision_models() -> types.ModuleType:
    """``torchvision.models``. The PyPI wheel's C++ ops are built for the CUDA torch; on a CPU
    torch its package ``__init__`` fails to register them, so load the package without it
    (the models need no custom op)."""
    try:
        import torchvision.models as models
    except (RuntimeError, OSError):
        for name in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[name]
        spec = importlib.util.find_spec("torchvision")
        if spec is None or spec.origin is None:
            raise SystemExit("torchvision is not installed: pip install torchvision==0.28.0") from None
        stub = types.ModuleType("torchvision")
        stub.__path__ = [os.path.dirname(spec.origin)]
        sys.modules["torchvision"] = stub
        import torchvision.models as models
    return models


# ------------------------------------------------------------------ BERT, in plain torch
class BertSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
        ctx = torch.softmax(scores, dim=-1) @ v
        b, h, t, dh = ctx.shape
        return ctx.permute(0, 2, 1, 3).reshape(b, t, h * dh)


class BertLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.attention = BertSelfAttention(d, heads)
        self.attention_output, self.attention_norm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.intermediate, self.act = nn.Linear(d, ff), nn.GELU()
        self.output, self.output_norm = nn.Linear(ff, d), nn.LayerNorm(d, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.attention_output(self.attention(x, mask)))
        return self.output_norm(x + self.output(self.act(self.intermediate(x))))


class BertEncoder(nn.Module):
    """BERT-base (Devlin et al. 2019): embeddings, ``layers`` post-norm encoder layers, pooler."""

    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, ff: int = 3072, vocab: int = 30522,
                 positions: int = 512):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(vocab, d), nn.Embedding(positions, d), \
            nn.Embedding(2, d)
        self.embedding_norm = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads, ff) for _ in range(layers))
        self.pooler, self.pooler_act = nn.Linear(d, d), nn.Tanh()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device)
        x = self.embedding_norm(self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(ids)))
        mask = torch.zeros(b, 1, 1, t, device=ids.device)  # no padding: an additive mask of zeros
        for layer in self.layers:
            x = layer(x, mask)
        return self.pooler_act(self.pooler(x[:, 0]))


# ------------------------------------------------------------------ GNMT, in plain torch
class LSTMCell(nn.Module):
    """One LSTM step, as ``nn.LSTMCell`` computes it."""

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.ih, self.hh = nn.Linear(inputs, 4 * hidden), nn.Linear(hidden, 4 * hidden)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = state
        i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class Attention(nn.Module):
    """Additive attention (Bahdanau et al. 2015), as GNMT's: ``v . tanh(W q + U k)``."""

    def __init__(self, d: int):
        super().__init__()
        self.query, self.keys, self.v = nn.Linear(d, d, bias=False), nn.Linear(d, d), nn.Linear(d, 1, bias=False)

    def forward(self, q: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        score = self.v(torch.tanh(self.query(q).unsqueeze(0) + keys)).squeeze(-1)  # (source steps, batch)
        weights = torch.softmax(score, dim=0)
        return (weights.unsqueeze(-1) * memory).sum(0)


class GNMT(nn.Module):
    """GNMT (Wu et al. 2016) with ``layers`` encoder and decoder layers, unrolled over
    ``source`` and ``target`` steps (teacher forcing: the decoder reads the target tokens)."""

    def __init__(self, layers: int = 4, d: int = 1024, vocab: int = 32000, source: int = 6, target: int = 6):
        super().__init__()
        self.source, self.target = source, target
        self.encoder_embedding, self.decoder_embedding = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
        self.forward_cell, self.backward_cell = LSTMCell(d, d), LSTMCell(d, d)
        self.encoder = nn.ModuleList([LSTMCell(2 * d, d)] + [LSTMCell(d, d) for _ in range(layers - 2)])
        self.decoder = nn.ModuleList([LSTMCell(d, d)] + [LSTMCell(2 * d, d) for _ in range(layers - 1)])
        self.attention = Attention(d)
        self.classifier = nn.Linear(d, vocab)

    def run(self, cell: LSTMCell, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        h = c = torch.zeros_like(xs[0][:, : cell.hh.in_features])
        out = []
        for x in xs:
            h, c = cell(x, (h, c))
            out.append(h)
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        src, tgt = ids[:, : self.source], ids[:, self.source:]
        emb = self.encoder_embedding(src)
        xs = [emb[:, t] for t in range(self.source)]
        fwd, bwd = self.run(self.forward_cell, xs), self.run(self.backward_cell, xs[::-1])[::-1]
        xs = [torch.cat([f, b], dim=1) for f, b in zip(fwd, bwd)]
        for k, cell in enumerate(self.encoder):
            out = self.run(cell, xs)
            xs = [o + x for o, x in zip(out, xs)] if k >= 1 else out  # residuals from the third layer on
        memory = torch.stack(xs)  # (source steps, batch, d)
        keys = self.attention.keys(memory)
        emb = self.decoder_embedding(tgt)
        states = [(torch.zeros_like(xs[0]), torch.zeros_like(xs[0])) for _ in self.decoder]
        logits = []
        for t in range(self.target):
            h = emb[:, t]
            for k, cell in enumerate(self.decoder):
                if k == 0:
                    states[0] = cell(h, states[0])
                    h = states[0][0]
                    ctx = self.attention(h, keys, memory)
                else:
                    states[k] = cell(torch.cat([h, ctx], dim=1), states[k])
                    h = states[k][0] + h if k >= 2 else states[k][0]
            logits.append(self.classifier(h))
        return torch.stack(logits, dim=1)


# ------------------------------------------------------------------ tracing
LAYERS = {
    "inception_v3": ("BasicConv2d", "MaxPool2d", "AdaptiveAvgPool2d", "Dropout", "Linear"),
    "resnet50": ("Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "AdaptiveAvgPool2d", "Linear"),
    "bert": ("Embedding", "LayerNorm", "Linear", "GELU", "Tanh", "BertSelfAttention"),
    "gnmt": ("Embedding", "LSTMCell", "Attention", "Linear"),
}
"""Per model, the module classes that make a layer (see the module's docstring)."""


def model(kind: str) -> tuple[nn.Module, torch.dtype]:
    """The model on the meta device (eval mode for inference) and its input's dtype."""
    if kind in ("inception_v3", "resnet50", "resnet50_train"):
        models = torchvision_models()
    with torch.device("meta"):
        if kind == "inception_v3":
            return models.inception_v3(weights=None, aux_logits=False, init_weights=False).eval(), torch.float32
        if kind == "resnet50":
            return models.resnet50(weights=None).eval(), torch.float32
        if kind == "resnet50_train":
            return models.resnet50(weights=None), torch.float32
        if kind == "bert":
            return BertEncoder().eval(), torch.long
        if kind == "gnmt":
            return GNMT().eval(), torch.long
    raise ValueError(kind)


def inference_graph(net: nn.Module, shape: tuple[int, ...], dtype: torch.dtype) -> torch.fx.GraphModule:
    """The aten graph of one forward pass under ``no_grad``, each node with its ``nn_module_stack``."""
    mode = torch._subclasses.fake_tensor.FakeTensorMode()
    with mode:
        state = {k: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype)
                 for k, v in (*net.named_parameters(), *net.named_buffers())}
        x = torch.zeros(shape, dtype=dtype)

    def forward(state: dict, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return functional_call(net, state, (x,))

    forward._orig_mod = net  # make_fx records module stacks only under a root module
    return make_fx(forward, tracing_mode="fake", record_module_stack=True)(state, x)


def layer_of(stack: dict | None, layers: tuple[str, ...]) -> str:
    """The layer call an op belongs to: the outermost module of ``stack`` of a layer class
    (its key, which numbers repeated calls ``@k``), else the innermost; ``""`` for the root."""
    entries = list((stack or {}).items())
    for key, (_, cls) in entries:
        if cls.rsplit(".", 1)[-1] in layers:
            return key
    return entries[-1][0] if entries else ""


def layer_groups(gm: torch.fx.GraphModule, ops: list[Op], layers: tuple[str, ...]) -> list[tuple[str, list[int]]]:
    """Runs of consecutive ops of one layer call, named after it; a run of views alone joins
    the run before it (the first such run, the one after it)."""
    meta = {n.name: n.meta.get("nn_module_stack") for n in gm.graph.nodes}
    runs: list[tuple[str, list[int]]] = []
    for k, op in enumerate(ops):
        key = layer_of(meta.get(op.name), layers)
        if runs and runs[-1][0] == key:
            runs[-1][1].append(k)
        else:
            runs.append((key, [k]))
    merged: list[tuple[str, list[int]]] = []
    pending: list[int] = []
    for key, members in runs:
        if all(ops[k].view for k in members):
            if merged:
                merged[-1][1].extend(members)
            else:
                pending.extend(members)
            continue
        merged.append((key, pending + members))
        pending = []
    if pending:  # only views: one group
        merged.append(("views", pending))
    seen: dict[str, int] = {}
    out = []
    for key, members in merged:
        base = (key or "root").replace("@", "#")
        seen[base] = seen.get(base, 0) + 1
        out.append((base if seen[base] == 1 else f"{base}~{seen[base]}", members))
    return out


def layer_problem(fine: Problem, ops: list[Op], groups: list[tuple[str, list[int]]], name: str) -> Problem:
    """Each group one task: summed times and memory; an edge per pair of groups carrying each
    tensor (producer op) that crosses once, at the most any consumer reads of it."""
    of = np.empty(len(ops), dtype=np.int64)
    for g, (_, members) in enumerate(groups):
        of[members] = g
    tasks = []
    for label, members in groups:
        lat = {d: float(sum(fine.tasks[k].latency[d][1] for k in members)) for d in fine.device_names}
        tasks.append(Task(label, lat, float(sum(ops[k].weight for k in members)), 0.0,
                          float(sum(ops[k].output for k in members))))
    crossing: dict[tuple[int, int], dict[int, float]] = {}
    for k, op in enumerate(ops):
        for j, b in op.inputs.items():
            if of[j] != of[k]:
                tensors = crossing.setdefault((int(of[j]), int(of[k])), {})
                tensors[j] = max(tensors.get(j, 0.0), b)
    edges = [Edge(groups[a][0], groups[b][0], float(sum(t.values()))) for (a, b), t in sorted(crossing.items())]
    return Problem(tasks, edges, fine.system, None, name)


# ------------------------------------------------------------------ systems
def host_staged(accelerators: int, acc_memory: float, cpus: int) -> Platform:
    """``accelerators`` T4-class devices of ``acc_memory`` bytes and ``cpus`` CPU cores that hold
    the model, every pair linked through host memory at 2 GiB/s."""
    devs = tuple(DeviceProfile(f"acc{k}", ACC_SLOWDOWN, 0.6, acc_memory, "host0") for k in range(accelerators)) + \
        tuple(DeviceProfile(f"cpu{k}", CPU_SLOWDOWN, 0.9, CPU_MEMORY, "host0") for k in range(cpus))
    links = tuple(Link(a.name, b.name, HOST_BANDWIDTH, HOST_LATENCY_MS) for i, a in enumerate(devs)
                  for b in devs[i + 1:])
    return Platform(f"{accelerators}acc-{cpus}cpu", devs, links)


def tight_platform(ops: list[Op], accelerators: int, cpus: int) -> Platform:
    """:func:`host_staged` with accelerators that together hold ``ACC_SHARE`` of the model's memory
    (rounded down to 1/20 GiB), each still holding its largest op."""
    need = sum(op.weight + op.output for op in ops)
    mem = math.floor(ACC_SHARE * need / accelerators / (GIB / 20)) * (GIB / 20)
    largest = max(op.weight + op.output for op in ops)
    if mem < largest:
        raise SystemExit(f"accelerator memory {mem / GIB:.2f} GiB holds not the largest op ({largest / GIB:.2f} GiB)")
    return host_staged(accelerators, mem, cpus)


MODELS: dict[str, tuple[tuple[int, ...], tuple[str, ...], int, int]] = {
    # name: (input shape, granularities, accelerators, CPU cores)
    "inception_v3": ((32, 3, 299, 299), ("layer", "op"), 3, 8),
    "resnet50": ((32, 3, 224, 224), ("layer", "op"), 2, 6),
    "bert": ((24, 128), ("layer", "op"), 3, 12),  # token ids
    "gnmt": ((256, 12), ("layer", "op"), 2, 16),  # 6 source then 6 target token ids
    "resnet50_train": ((16, 3, 224, 224), ("op",), 4, 12),
}


def build(name: str) -> list[Problem]:
    """The instances of one entry of ``MODELS``."""
    shape, grains, accelerators, cpus = MODELS[name]
    net, dtype = model(name)
    gm = step_graph(net, shape, dtype) if name.endswith("_train") else inference_graph(net, shape, dtype)
    ops = step_ops(gm)
    plat = tight_platform(ops, accelerators, cpus)
    base = name.replace("_", "-")
    fine = op_problem(ops, plat, f"{base}-op")
    out = []
    for grain in grains:
        if grain == "op":
            out.append(fine)
        else:
            out.append(layer_problem(fine, ops, layer_groups(gm, ops, LAYERS[name]), f"{base}-layer"))
    return out


def write(p: Problem, out: str) -> str:
    """``out/NAME.json.gz``, compact and byte for byte the same at every run (no time stamp)."""
    path = os.path.join(out, f"{p.name}.json.gz")
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=9) as z:
        z.write(p.to_json(indent=None).encode())
    return path


def stats(p: Problem) -> dict:
    """The figures of ``docs/real-models.md``'s table."""
    acc = [u for u, d in enumerate(p.device_names) if d.startswith("acc")]
    need = float((p.weight + p.act).sum())
    fastest = float(np.min(p.dur, axis=1).sum())
    transfer = float(np.sum(HOST_LATENCY_MS + p.nbytes * 1000.0 / HOST_BANDWIDTH))
    return {"tasks": p.n, "edges": p.E, "devices": p.m, "accelerators": len(acc), "memory_gib": need / GIB,
            "acc_memory_gib": float(p.mem[acc].sum()) / GIB if acc else 0.0,
            "acc_each_gib": float(p.mem[acc[0]]) / GIB if acc else 0.0,
            "compute_ms": fastest, "transfer_ms": transfer}


def table(problems: list[Problem], sizes: dict[str, int]) -> str:
    rows = ["| instance | tasks | edges | devices (acc + cpu) | memory (GiB) | accelerators' memory (GiB) | "
            "compute (ms) | transfers (ms) | transfer / compute | file (KB) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for p in problems:
        s = stats(p)
        rows.append(f"| real/{p.name} | {s['tasks']:,} | {s['edges']:,} | {s['devices']} ({s['accelerators']} + "
                    f"{s['devices'] - s['accelerators']}) | {s['memory_gib']:.2f} | {s['acc_memory_gib']:.2f} "
                    f"({s['accelerators']} x {s['acc_each_gib']:.2f}) | {s['compute_ms']:.1f} | "
                    f"{s['transfer_ms']:.1f} | {s['transfer_ms'] / s['compute_ms']:.1f} | "
                    f"{sizes.get(p.name, 0) / 1024:.0f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT, help="folder of the .json.gz files (default: the package's)")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="these models only")
    ap.add_argument("--table", action="store_true", help="print the markdown table of docs/real-models.md")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    done: list[Problem] = []
    sizes: dict[str, int] = {}
    for name in a.only or MODELS:
        t0 = time.perf_counter()
        for p in build(name):
            path = write(p, a.out)
            sizes[p.name] = os.path.getsize(path)
            done.append(p)
            print(f"{path}: {p.n} tasks, {p.E} edges, {p.m} devices ({time.perf_counter() - t0:.1f} s)",
                  file=sys.stderr)
    if a.table:
        print(table(done, sizes))


if __name__ == "__main__":
    main()
