#!/usr/bin/env bash
# The GPU checks of the fidelity issue as one command, for a session lent a GPU machine
# (not yet run on one; run E's single round took 273 s for four of the six models on an H200,
# BENCHMARKS.md): the CUDA tests, then bench_harness's CUDA rows through the
# README's flow (tasks as CUDA graphs, one round, with the input assembly table), saved.
#
#     bash benchmarks/device_check.sh OUTDIR
#
# That machine has PyTorch but not mapsched's solvers, and nothing can be fetched there:
# carry their wheels in .whl (git-ignored through .git/info/exclude), fetched here for its
# Python 3.12 with
#
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#         --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#         "pyomo>=6.7" highspy==1.12.0 ortools==9.15.6755 ply immutabledict "protobuf>=6.33.1,<6.34"
#
# DEVICES (default cpu,cuda:0), THREADS (the CPU's, default 8), MODELS (default every example
# model) and COMPILE (default cuda-graph) change what is measured; a machine without a GPU
# can try the script with DEVICES=cpu:0,cpu:1 THREADS=1 COMPILE=none MODELS=resnet.
set -o pipefail
out=${1:?give the folder for the logs and the saved runs}
mkdir -p "$out"
devices=${DEVICES:-cpu,cuda:0}
compile=${COMPILE:-cuda-graph}
threads=${THREADS:-8}
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if ! python3 -c "import pyomo, ortools, highspy" 2> /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
python3 - <<'EOF' 2>&1 | tee "$out/machine.txt"
import platform, torch, mapsched
print(platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU", "mapsched", mapsched.__version__)
EOF
[ "${devices#*cuda}" != "$devices" ] && python3 -m pytest -p no:cacheprovider -q tests/test_harness.py tests/test_lean.py \
    -k cuda 2>&1 | tail -5 | tee "$out/tests.txt"
models=${MODELS:-resnet,inception,random-wired,transformer,resnet18,transformer-1024}
python3 benchmarks/bench_harness.py --devices "$devices" --threads "$threads" --max-spread 1 --random 8 --warmup 2 \
    --repeats 10 --as-cli --assembly --compile "$compile" --models "$models" --save "$out/harness.jsonl" \
    2>&1 | tee "$out/harness.txt"
