#!/usr/bin/env bash
# Create tools/reference/.venv with the exact reference stack (qwen-tts 0.1.1 + transformers 4.57.3).
# Only needed to regenerate tests/fixtures; CI and the C tests never run this.
#   tools/reference/setup.sh            (uses $PYTHON or python3; the fixtures were made with 3.11.7)
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
"$PY" -m venv .venv
.venv/bin/python -m pip install --upgrade pip
.venv/bin/python -m pip install -r requirements.txt
.venv/bin/python -c "import qwen_tts, transformers, torch; print('qwen-tts ready: transformers', transformers.__version__, 'torch', torch.__version__)"
