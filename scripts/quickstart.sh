#!/usr/bin/env bash
# One command from a fresh checkout to a WAV file: installs the build
# dependencies (Debian/Ubuntu), builds, downloads the model, synthesizes.
#
#   scripts/quickstart.sh ["text to speak"] [out.wav] [HF repo]
set -euo pipefail
cd "$(dirname "$0")/.."
text=${1:-"Hello! This is Qwen3 TTS running in pure C."}
out=${2:-hello.wav}
repo=${3:-Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice}
if [ ! -f /usr/include/utf8proc.h ] || [ ! -f /usr/include/sndfile.h ] || [ ! -f /usr/include/soxr.h ] || [ ! -f /usr/include/sonic.h ] ||
    ! command -v cc >/dev/null || ! command -v curl >/dev/null; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq &&
        $sudo apt-get install -y -qq build-essential libutf8proc-dev libsndfile1-dev libsoxr-dev libsonic-dev curl
fi
make -j"$(nproc)"
dir="models/${repo#*/}"
[ -f "$dir/speech_tokenizer/model.safetensors" ] || scripts/download_model.sh "$repo" "$dir"
speaker=()
case "$repo" in *CustomVoice*) speaker=(--speaker vivian) ;; esac
build/qwen3-tts synth -m "$dir" "${speaker[@]}" --language auto --text "$text" -o "$out"
