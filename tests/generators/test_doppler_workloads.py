"""DOPPLER's workloads: shapes, sharding, costs, and the work-conserving model on them."""

import numpy as np
import pytest

from mapsched import solve, validate
from mapsched.generators import chainmm, ffnn, identical_gpus, llama_block, llama_layer
from mapsched.generators.doppler import _cuts, _split3
from mapsched.scheduling.simulate import simulate

KINDS = [chainmm, ffnn, llama_block, llama_layer]


def test_split_and_cuts():
    assert [_split3(n) for n in (1, 2, 4, 6, 8, 16)] == [(1, 1, 1), (2, 1, 1), (2, 2, 1), (3, 2, 1), (2, 2, 2),
                                                         (4, 2, 2)]
    assert _cuts(10, 3) == [0, 3, 7, 10] and _cuts(4096, 3, 128) == [0, 1408, 2688, 4096]


@pytest.mark.parametrize("make", KINDS)
@pytest.mark.parametrize("n", [1, 3, 4, 8])
def test_shapes_and_identical_gpus(make, n):
    p = make(n)
    assert p.m == n and np.allclose(p.dur, p.dur[:, :1])  # the same time on every GPU
    assert np.isinf(p.mem).all() and (p.nbytes > 0).all()
    s = simulate(p, np.arange(p.n) % n)
    assert validate(p, s) == []
    one = simulate(p, np.zeros(p.n, dtype=int))
    assert one.makespan == pytest.approx(p.dur[:, 0].sum())  # one GPU never idles


def test_chainmm_products_and_transfers():
    # N block products per matmul; CDE's products read DE's output blocks (2000 x 2000 fp32 in all,
    # each read by every product that needs its rows: pj of them for pi x pj x pk = 2 x 2 x 1).
    size = 2000
    for n in (1, 4, 8):
        p = chainmm(n, size=size)
        for mm in ("AB", "DE", "CDE"):
            assert sum(t.startswith(mm + "[") for t in p.task_names) == n
        read = sum(e.bytes for e in p.edges if e.src.startswith("DE") and e.dst.startswith("CDE["))
        pi, pj, pk = {1: (1, 1, 1), 4: (2, 2, 1), 8: (2, 2, 2)}[n]
        assert read == 4 * size * size * pi  # each block of DE is read by the pi row blocks of CDE


def test_llama_attention_by_head_groups():
    p = llama_block(4)
    names = set(p.task_names)
    assert {f"scores[{j}]" for j in range(4)} <= names and {f"pv[{j}]" for j in range(4)} <= names
    assert {f"wo[0,0,{j}]" for j in range(4)} <= names and {f"wo.sum[{j},0]" for j in range(4)} <= names
    pv = {e.src: e.bytes for e in p.edges if e.dst == "pv[1]"}
    assert set(pv) == {"softmax[1]", "wv[0,1]"}
    q = llama_layer(4)
    assert q.n == p.n + 8 and {"embed[0]", "final_norm[3,0]"} <= set(q.task_names)


def test_critical_path_beats_one_gpu_on_chainmm():
    p = chainmm(4, size=4000)
    r = solve(p, "critical-path", seed=0, runs=10)
    assert validate(p, r) == [] and r.makespan < 0.5 * p.dur[:, 0].sum()


def test_bad_device_count():
    with pytest.raises(ValueError, match="devices"):
        identical_gpus(0)
    with pytest.raises(ValueError, match="devices"):
        ffnn(0)
