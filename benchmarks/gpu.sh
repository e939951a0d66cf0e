#!/usr/bin/env bash
# The GPU checks and timings, as one run on a machine with a CUDA GPU:
#
#     bash benchmarks/gpu.sh OUT_DIR [TRAIN_SECONDS] [MULTI30K_DIR]
#
# 1. the CUDA tests (tests/train/test_precision.py: training on CUDA equals the CPU's, its checkpoints load on
#    a CPU, bf16 autocast trains), 2. the rnn-256 benchmark on the GPU in float32 and in bfloat16
#    autocast (benchmarks/rnn256.py --device cuda). Results: OUT_DIR/rnn256_cuda_{fp32,bf16}.json,
#    OUT_DIR/pytest.txt. Uses the python3 that has torch with CUDA; attnmt is taken from this checkout.
set -euo pipefail
out=${1:?usage: bash benchmarks/gpu.sh OUT_DIR [TRAIN_SECONDS] [MULTI30K_DIR]}
seconds=${2:-90}
multi30k=${3:-data/multi30k}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
python3 -m pytest -q -p no:cacheprovider tests/train/test_precision.py 2>&1 | tee "$out/pytest.txt" || echo "CUDA TESTS FAILED"
for precision in bf16 fp32; do
    python3 benchmarks/rnn256.py --multi30k "$multi30k" --device cuda --precision "$precision" \
        --seconds "$seconds" --threads 4 --out "$out/rnn256_cuda_$precision.json" | tail -n 12
done
