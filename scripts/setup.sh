#!/usr/bin/env bash
# Create .venv with everything attnmt and its tests need. Torch first: its pinned CPU wheel is on
# this kind of machine's disk, while an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[test,tensorboard,serve]"
