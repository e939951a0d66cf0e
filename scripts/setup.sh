#!/usr/bin/env bash
# Set up attnmt in .venv.
#   bash scripts/setup.sh         what `attnmt` needs (train, translate, demo, serve)
#   bash scripts/setup.sh --dev   also what the tests need: the test tools, manim for the animations,
#                                 and Debian's chromium (browser test), ffmpeg, cairo and pango (manim)
#                                 and a CJK font (Chinese in plots and screenshots)
# Torch comes first and pinned: its CPU wheel lies on this kind of machine's disk, while an
# unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
dev=0
[ "${1:-}" = "--dev" ] && dev=1

if [ "$dev" = 1 ]; then
  packages="chromium fonts-noto-cjk ffmpeg libcairo2-dev libpango1.0-dev pkg-config"
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null || echo "setup: apt-get update failed; installing from the cached package lists"
    # All at once, and if that fails one by one, so that one unavailable package does not stop the rest.
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null 2>&1; then
      for p in $packages; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null 2>&1 || true
      done
    fi
  fi
  if command -v dpkg-query >/dev/null; then
    missing=""
    for p in $packages; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
      echo "setup: could not install:$missing (apt-get install -y$missing, as root); the tests that need them" \
           "skip, and fail under CI=true"
    fi
  else
    echo "setup: no dpkg: install the equivalents of $packages yourself, or the tests that need them skip" \
         "(and fail under CI=true)"
  fi
fi

# pip's own failures stop the script (pipefail); only its warnings about local indexes are hidden.
pipq() { .venv/bin/pip install -q "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }
[ -x .venv/bin/python ] || python3 -m venv .venv
pipq --upgrade pip
pipq torch==2.13.0
extras="serve,tensorboard"
[ "$dev" = 1 ] && extras="$extras,test,anim,align,zh,ja,notebook,ct2"
pipq -e ".[$extras]"
.venv/bin/python -c "import attnmt, torch; print(f'attnmt {attnmt.__version__} with torch {torch.__version__} in .venv')"
