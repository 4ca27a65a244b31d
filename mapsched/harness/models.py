"""Example models in PyTorch: small ones to profile, and large ones to trace a training step of.

There is no torchvision here, so mapsched ships its own. The small models
(:data:`FACTORIES`) serve as examples of ``mapsched profile MODULE:FACTORY`` and in
the harness tests: every factory takes keyword arguments only, returns a model in
``eval()`` mode with fixed (seeded) weights, and sets ``model.input_shape`` (batch
of 1), which the CLI uses when ``--input-shape`` is not given. They keep the batch
dimension first and never compute a Python number from it (``flatten(1)`` rather
than ``view(x.size(0), -1)``), so that a schedule may run their ops on batches of
any size.

The training-step models (:func:`gpt`, :func:`gpt_train12`, :func:`gpt_train22`,
:func:`resnet50`) are for ``mapsched trace``: they are built on the meta device
(shapes only: no weights, no memory, built in well under a second), their
``input_shape`` is a whole training batch, and ``input_dtype`` says what the input
holds (token ids for the GPTs). Their outputs are class logits on the last
dimension, as the traced cross-entropy loss expects.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from mapsched.errors import OptionError
from mapsched.generators.random_wired import module_graph

__all__ = ["FACTORIES", "LARGE", "gpt", "gpt_train12", "gpt_train22", "inception", "random_wired", "resnet", "resnet18",
           "resnet50", "transformer"]


def _conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class _Residual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1, self.bn1, self.relu1 = _conv_bn(cin, cout, 3, stride)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(y + self.short(x))


class _Head(nn.Module):
    def __init__(self, cin: int, classes: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(x), 1))


def _finish(model: nn.Module, input_shape: tuple[int, ...], seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # seeded weights: the same factory call gives the same model
            p.copy_(torch.randn(p.shape, generator=gen) * (1.0 / math.sqrt(max(1, p[0].numel()))))
    model.input_shape = input_shape
    return model.eval()


def resnet(width: int = 16, blocks: tuple[int, ...] = (1, 1, 1), classes: int = 10, image: int = 32,
           seed: int = 0) -> nn.Module:
    """A ResNet-like network: a stem, stages of residual blocks, pooling and a classifier.

    >>> m = resnet()
    >>> tuple(m(torch.zeros(m.input_shape)).shape)
    (1, 10)
    """
    layers: list[nn.Module] = [*_conv_bn(3, width)]
    cin = width
    for stage, count in enumerate(blocks):
        cout = width * 2**stage
        for b in range(count):
            layers.append(_Residual(cin, cout, 2 if b == 0 and stage > 0 else 1))
            cin = cout
    layers.append(_Head(cin, classes))
    return _finish(nn.Sequential(*layers), (1, 3, image, image), seed)


class _Images(nn.Module):
    """Run ``body`` on every input's ``images`` images at once: an input is a mini-batch."""

    def __init__(self, body: nn.Module, images: int):
        super().__init__()
        self.body, self.images = body, images

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (inputs, images, ...) -> (inputs * images, ...) and back: the rows of one input stay
        # together, so a schedule may still run any subset of the inputs.
        return self.body(x.flatten(0, 1)).unflatten(0, (-1, self.images))


def resnet18(images: int = 8, image: int = 32, classes: int = 10, seed: int = 0) -> nn.Module:
    """ResNet-18 for ``image``-pixel images (a 3x3 stem, basic blocks 2, 2, 2, 2 of width 64 to
    512; 11.2M parameters), each input a mini-batch of ``images`` images.

    Its convolutions take milliseconds on one CPU thread, so the harness's fixed cost per
    job is small beside them (:func:`resnet` at the test sizes takes tens of microseconds).

    >>> m = resnet18(images=2, image=16)
    >>> m.input_shape, tuple(m(torch.zeros(m.input_shape)).shape)
    ((1, 2, 3, 16, 16), (1, 2, 10))
    """
    body = resnet(64, (2, 2, 2, 2), classes, image, seed)
    return _finish(_Images(body, images), (1, images, 3, image, image), seed)


class _InceptionBlock(nn.Module):
    def __init__(self, cin: int, c: int):
        super().__init__()
        self.b1 = nn.Sequential(*_conv_bn(cin, c, 1))
        self.b3 = nn.Sequential(*_conv_bn(cin, c, 1), *_conv_bn(c, c, 3))
        self.b5 = nn.Sequential(*_conv_bn(cin, c, 1), *_conv_bn(c, c, 3), *_conv_bn(c, c, 3))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), *_conv_bn(cin, c, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


def inception(width: int = 8, blocks: int = 3, classes: int = 10, image: int = 32, seed: int = 0) -> nn.Module:
    """An Inception-like network of branching blocks (1×1, 3×3, double 3×3 and pooling branches).

    >>> m = inception()
    >>> tuple(m(torch.zeros(m.input_shape)).shape)
    (1, 10)
    """
    layers: list[nn.Module] = [*_conv_bn(3, 4 * width)]
    for _ in range(blocks):
        layers.append(_InceptionBlock(4 * width, width))
    layers.append(_Head(4 * width, classes))
    return _finish(nn.Sequential(*layers), (1, 3, image, image), seed)


class _Node(nn.Module):
    """A node of a randomly wired network: a learned sum of its inputs, then ReLU-conv-BN."""

    def __init__(self, inputs: int, c: int):
        super().__init__()
        self.mix = nn.Parameter(torch.ones(inputs))
        self.conv = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        s = xs[0] * torch.sigmoid(self.mix[0])
        for k in range(1, len(xs)):
            s = s + xs[k] * torch.sigmoid(self.mix[k])
        return self.bn(self.conv(torch.relu(s)))


class _RandomWired(nn.Module):
    def __init__(self, graph, c: int, classes: int):
        super().__init__()
        self.order = list(graph.nodes)
        self.preds = {v: sorted(graph.predecessors(v)) for v in self.order}
        self.sinks = [v for v in self.order if graph.out_degree(v) == 0]
        self.stem = nn.Sequential(*_conv_bn(3, c))
        self.nodes = nn.ModuleList(_Node(max(1, len(self.preds[v])), c) for v in self.order)
        self.head = _Head(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        out: dict[int, torch.Tensor] = {}
        for k, v in enumerate(self.order):  # fx unrolls this loop: the graph is fixed at build time
            out[v] = self.nodes[k](*[out[u] for u in self.preds[v]] or [x])
        y = out[self.sinks[0]]
        for v in self.sinks[1:]:
            y = y + out[v]
        return self.head(y)


def random_wired(n: int = 10, kind: str = "er", width: int = 8, classes: int = 10, image: int = 16,
                 seed: int = 0) -> nn.Module:
    """A randomly wired network (Xie et al., 2019) on :func:`mapsched.generators.module_graph`.

    >>> m = random_wired(n=6)
    >>> tuple(m(torch.zeros(m.input_shape)).shape)
    (1, 10)
    """
    g = module_graph(n, kind, seed)
    g.add_nodes_from(range(n))
    order = sorted(g.nodes)  # edges go from low to high index, so this is topological
    ordered = type(g)()
    ordered.add_nodes_from(order)
    ordered.add_edges_from(g.edges)
    return _finish(_RandomWired(ordered, width, classes), (1, 3, image, image), seed)


class _DecoderBlock(nn.Module):
    """Pre-norm causal self-attention and an MLP, each with a residual connection."""

    def __init__(self, d: int, heads: int, tokens: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.triu(torch.full((tokens, tokens), float("-inf")), 1))

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        return t.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        q, k, v = self._split(self.q(h)), self._split(self.k(h)), self._split(self.v(h))
        scale = 1.0 / math.sqrt(q.shape[-1])
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale + self.mask, -1)
        x = x + self.proj(torch.matmul(att, v).transpose(1, 2).flatten(2))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


def transformer(d_model: int = 64, heads: int = 4, tokens: int = 20, layers: int = 1, seed: int = 0) -> nn.Module:
    """A stack of transformer decoder blocks over ``tokens`` embedded tokens.

    >>> m = transformer()
    >>> tuple(m(torch.zeros(m.input_shape)).shape)
    (1, 20, 64)
    """
    blocks = nn.Sequential(*(_DecoderBlock(d_model, heads, tokens) for _ in range(layers)))
    return _finish(blocks, (1, tokens, d_model), seed)


FACTORIES = {"resnet": resnet, "inception": inception, "random-wired": random_wired, "transformer": transformer}
"""The example models by short name."""

LARGE = {"resnet18": resnet18, "transformer-1024": partial(transformer, d_model=1024, heads=16, tokens=64)}
"""Example models whose ops take at least half a millisecond on one CPU thread, where the
harness's cost per job is small beside the kernels (slow to profile: not in the tests)."""


# ------------------------------------------------------------ training-step models (meta device)
class _AttentionHead(nn.Module):
    """One causal attention head with its own Q, K and V projections (separate ops, as in the
    graphs of Celeritas's Transformer)."""

    def __init__(self, d: int, dh: int):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, dh), nn.Linear(d, dh), nn.Linear(d, dh)
        self.scale = 1.0 / math.sqrt(dh)

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(h), self.k(h), self.v(h)
        return torch.softmax(q @ k.transpose(-2, -1) * self.scale + mask, -1) @ v


class _GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int, ff: int, tokens: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.heads = nn.ModuleList(_AttentionHead(d, d // heads) for _ in range(heads))
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.register_buffer("mask", torch.triu(torch.full((tokens, tokens), float("-inf")), 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.proj(torch.cat([head(h, self.mask) for head in self.heads], -1))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class _GPT(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, ff: int, vocab: int, tokens: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(tokens, d))
        self.blocks = nn.Sequential(*(_GPTBlock(d, heads, ff, tokens) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(self.blocks(self.tok(ids) + self.pos)))


def gpt(layers: int = 1, d_model: int = 32, heads: int = 2, ff: int | None = None, vocab: int = 100,
        tokens: int = 16, batch: int = 2) -> nn.Module:
    """A GPT-style decoder on the meta device, for ``mapsched trace``.

    Token and position embeddings, ``layers`` pre-norm blocks (causal attention whose
    ``heads`` heads each have their own Q, K and V ``Linear``; an output projection; a
    GELU MLP of width ``ff``, default ``4 * d_model``), a final layer norm and a
    bias-free projection to ``vocab`` logits. ``input_shape`` is ``(batch, tokens)``
    of token ids. :func:`mapsched.generators.transformer_train` builds the same
    training step without torch.

    >>> m = gpt()
    >>> m.input_shape, m.input_dtype, next(m.parameters()).device.type
    ((2, 16), torch.int64, 'meta')
    """
    if d_model % heads:
        raise OptionError(f"heads: expected a divisor of d_model={d_model}, got {heads}")
    with torch.device("meta"):
        model = _GPT(layers, d_model, heads, ff or 4 * d_model, vocab, tokens)
    model.input_shape, model.input_dtype = (batch, tokens), torch.long
    return model


def gpt_train12() -> nn.Module:
    """:func:`gpt` in the configuration measured in the Celeritas/Baechi note: 12 layers,
    d_model 1024, 16 heads, MLP 4096, vocabulary 32,000, batch 8 x 128 tokens (217M
    parameters). Its training step traces to 18,951 ops."""
    return gpt(12, 1024, 16, 4096, 32000, 128, 8)


def gpt_train22() -> nn.Module:
    """:func:`gpt_train12` with 22 layers (343M parameters): 34,711 ops per training step."""
    return gpt(22, 1024, 16, 4096, 32000, 128, 8)


class _Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(*_conv_bn(cin, width, 1), *_conv_bn(width, width, 3, stride),
                                  nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


def resnet50(batch: int = 32, image: int = 224, classes: int = 1000) -> nn.Module:
    """ResNet-50 (bottleneck blocks 3, 4, 6, 3; 25.6M parameters) on the meta device, for
    ``mapsched trace``; ``input_shape`` is ``(batch, 3, image, image)``.

    >>> m = resnet50()
    >>> m.input_shape, sum(p.numel() for p in m.parameters())
    ((32, 3, 224, 224), 25557032)
    """
    with torch.device("meta"):
        layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                   nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for stage, count in enumerate((3, 4, 6, 3)):
            for b in range(count):
                layers.append(_Bottleneck(cin, 64 * 2**stage, 2 if b == 0 and stage > 0 else 1))
                cin = 256 * 2**stage
        model = nn.Sequential(*layers, _Head(cin, classes))
    model.input_shape, model.input_dtype = (batch, 3, image, image), torch.float32
    return model
