"""Standard network shapes with op costs from a FLOP and bytes model.

Each op is timed on the reference device by a roofline: ``max(FLOPs / 19.5 TFLOP/s,
bytes / 1.5 TB/s) + 10 us`` of launch overhead (an A100 in fp32), then scaled by each
device's slowdown and batching exponent as in :mod:`.costs`. Bytes count weights
plus input and output activations (fp32). See ``docs/cost-model.md``.

Shapes: VGG-like and ResNet-like chains, Inception-like branching blocks (whose
concatenations are articulation points) and a transformer decoder block whose
attention heads run in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mapsched.generators.costs import Platform, cpu_t4_a100
from mapsched.model.problem import Edge, Objective, Problem, Task

__all__ = ["gpt3", "inception", "resnet", "transformer", "vgg"]

PEAK_FLOPS, PEAK_BYTES, LAUNCH_MS = 19.5e12, 1.5e12, 0.01
F32 = 4


class _Net:
    """A graph of ops, each with FLOPs, weight bytes and output bytes per input."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ops: list[tuple[str, float, float, float, float, tuple[str, ...]]] = []
        self.sizes: dict[tuple[str, str], float] = {}  # bytes of an edge, where not its source's output

    def op(self, name: str, flops: float, weight: float, out: float, parents: Sequence[str] = (),
           sizes: Sequence[float] | None = None) -> str:
        """Add an op; ``sizes`` gives the bytes it reads from each parent (default: their outputs)."""
        if sizes is None:
            inp = sum(next(o[4] for o in self.ops if o[0] == q) for q in parents)
        else:
            inp = sum(sizes)
            self.sizes.update({(q, name): float(b) for q, b in zip(parents, sizes)})
        self.ops.append((name, float(flops), float(weight), float(inp), float(out), tuple(parents)))
        return name

    def conv(self, name: str, parent: str | None, cin: int, cout: int, k: int, hw: int) -> str:
        """A conv + batch-norm + ReLU (fused, as the clustering step would) on an hw x hw map."""
        return self.op(name, 2 * cin * cout * k * k * hw * hw, F32 * cin * cout * k * k,
                       F32 * cout * hw * hw, [parent] if parent else [])

    def problem(self, platform: Platform | None, objective: Objective | None, seed: int) -> Problem:
        plat = platform or cpu_t4_a100()
        objective = objective or Objective()
        B = objective.inputs
        sizes = sorted({max(1, B * q // 4) for q in (1, 2, 3, 4)}) if B > 1 else [1]
        base = np.array([max(f / PEAK_FLOPS, (w + i + o) / PEAK_BYTES) * 1000 + LAUNCH_MS
                         for _, f, w, i, o, _ in self.ops])
        lat = plat.latencies(base, sizes, np.random.default_rng(seed))
        tasks = [Task(n, lat[k], w, i, o) for k, (n, _, w, i, o, _) in enumerate(self.ops)]
        edges = [Edge(q, n, self.sizes.get((q, n))) for n, *_, ps in self.ops for q in ps]
        return Problem(tasks, edges, plat.system(sizes), objective, self.name)


def vgg(depth: int = 11, platform: Platform | None = None, objective: Objective | None = None,
        seed: int = 0) -> Problem:
    """A VGG-like chain (VGG-11 or VGG-16 channel plan) on 224 x 224 inputs.

    Examples
    --------
    >>> p = vgg(11)
    >>> p.n, p.E
    (11, 10)
    """
    plans = {11: [1, 1, 2, 2, 2], 16: [2, 2, 3, 3, 3]}
    net, prev, cin, hw = _Net(f"vgg{depth}"), None, 3, 224
    for stage, (reps, cout) in enumerate(zip(plans[depth], (64, 128, 256, 512, 512))):
        for r in range(reps):
            prev = net.conv(f"conv{stage}.{r}", prev, cin, cout, 3, hw)
            cin = cout
        hw //= 2
    fc = net.op("fc6", 2 * 512 * 7 * 7 * 4096, F32 * 512 * 7 * 7 * 4096, F32 * 4096, [prev])
    fc = net.op("fc7", 2 * 4096 * 4096, F32 * 4096 * 4096, F32 * 4096, [fc])
    net.op("fc8", 2 * 4096 * 1000, F32 * 4096 * 1000, F32 * 1000, [fc])
    return net.problem(platform, objective, seed)


def resnet(blocks: Sequence[int] = (2, 2, 2, 2), platform: Platform | None = None,
           objective: Objective | None = None, seed: int = 0) -> Problem:
    """A ResNet-like network (basic blocks; ResNet-18 by default): each block two convs
    and a residual add, a 1x1 projection on the skip where the shape changes."""
    net = _Net(f"resnet{2 * sum(blocks) + 2}")
    prev, cin, hw = net.conv("stem", None, 3, 64, 7, 112), 64, 56
    for stage, (reps, cout) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for r in range(reps):
            if r == 0 and stage > 0:
                hw //= 2
            a = net.conv(f"b{stage}.{r}.conv1", prev, cin, cout, 3, hw)
            b = net.conv(f"b{stage}.{r}.conv2", a, cout, cout, 3, hw)
            skip = prev if cin == cout else net.conv(f"b{stage}.{r}.proj", prev, cin, cout, 1, hw)
            prev = net.op(f"b{stage}.{r}.add", cout * hw * hw, 0, F32 * cout * hw * hw, [b, skip])
            cin = cout
    net.op("fc", 2 * 512 * 1000, F32 * 512 * 1000, F32 * 1000, [prev])
    return net.problem(platform, objective, seed)


def inception(blocks: int = 4, platform: Platform | None = None, objective: Objective | None = None,
              seed: int = 0) -> Problem:
    """GoogLeNet-like: a stem, then blocks of four branches (1x1; 1x1 -> 3x3; 1x1 -> 5x5;
    pool -> 1x1) joined by a concatenation, on 28 x 28 maps of 256 channels."""
    net, c, hw = _Net(f"inception{blocks}"), 256, 28
    prev = net.conv("stem", None, 3, c, 7, hw)
    for t in range(blocks):
        b1 = net.conv(f"i{t}.1x1", prev, c, 64, 1, hw)
        r3 = net.conv(f"i{t}.3x3red", prev, c, 96, 1, hw)
        b3 = net.conv(f"i{t}.3x3", r3, 96, 128, 3, hw)
        r5 = net.conv(f"i{t}.5x5red", prev, c, 16, 1, hw)
        b5 = net.conv(f"i{t}.5x5", r5, 16, 32, 5, hw)
        pool = net.op(f"i{t}.pool", 9 * c * hw * hw, 0, F32 * c * hw * hw, [prev])
        bp = net.conv(f"i{t}.poolproj", pool, c, 32, 1, hw)
        prev = net.op(f"i{t}.concat", 0, 0, F32 * c * hw * hw, [b1, b3, b5, bp])
    net.op("fc", 2 * c * 1000, F32 * c * 1000, F32 * 1000, [prev])
    return net.problem(platform, objective, seed)


def transformer(layers: int = 1, d_model: int = 1024, heads: int = 8, tokens: int = 20,
                platform: Platform | None = None, objective: Objective | None = None, seed: int = 0,
                head_groups: int | None = None, name: str | None = None) -> Problem:
    """Transformer decoder blocks for one step over ``tokens`` tokens: layer norm, Q/K/V
    projection, attention heads in parallel, output projection and residual, layer
    norm, a 4x MLP and residual. ``head_groups`` tasks share the heads (default: one
    task per head)."""
    net, act = _Net(name or f"transformer{layers}x{d_model}"), F32 * tokens * d_model
    prev = net.op("embed", 0, 0, act)
    groups = head_groups or heads
    if not 1 <= groups <= heads or heads % groups:
        raise ValueError(f"head_groups: expected a divisor of heads={heads}, got {head_groups}")
    dh, per = d_model // heads, heads // groups
    for t in range(layers):
        ln1 = net.op(f"l{t}.ln1", 5 * tokens * d_model, F32 * 2 * d_model, act, [prev])
        qkv = net.op(f"l{t}.qkv", 2 * tokens * d_model * 3 * d_model, F32 * 3 * d_model * d_model, 3 * act, [ln1])
        hs = [net.op(f"l{t}.head{h}", 4 * tokens * tokens * dh * per, 0, F32 * tokens * dh * per, [qkv])
              for h in range(groups)]
        out = net.op(f"l{t}.proj", 2 * tokens * d_model * d_model, F32 * d_model * d_model, act, hs)
        res1 = net.op(f"l{t}.add1", tokens * d_model, 0, act, [out, prev])
        ln2 = net.op(f"l{t}.ln2", 5 * tokens * d_model, F32 * 2 * d_model, act, [res1])
        up = net.op(f"l{t}.mlp_up", 8 * tokens * d_model * d_model, F32 * 4 * d_model * d_model, 4 * act, [ln2])
        down = net.op(f"l{t}.mlp_down", 8 * tokens * d_model * d_model, F32 * 4 * d_model * d_model, act, [up])
        prev = net.op(f"l{t}.add2", tokens * d_model, 0, act, [down, res1])
    return net.problem(platform, objective, seed)


def gpt3(layers: int = 12, tokens: int = 20, head_groups: int = 4, platform: Platform | None = None,
         objective: Objective | None = None, seed: int = 0, d_model: int = 12288, heads: int = 96) -> Problem:
    """A GPT-3-like decoder (the 175B shape: d_model 12288, 96 heads) for one decoding
    step of ``tokens`` tokens per input, on ``layers`` of its 96 layers, by default on
    the :func:`~mapsched.generators.multi_node` system of 6 servers (the seed paper's
    section VI case study). Each layer holds about 7.2 GB of fp32 weights, so memory
    spreads the model over the servers.

    >>> from mapsched.generators import gpt3
    >>> p = gpt3(layers=2)
    >>> p.n, p.m
    (25, 30)
    """
    from mapsched.generators.costs import multi_node

    return transformer(layers, d_model, heads, tokens, platform or multi_node(), objective, seed,
                       head_groups=head_groups, name=f"gpt3-{layers}l")
