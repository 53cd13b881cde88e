#!/usr/bin/env bash
# Downloads a Qwen3-TTS model directory from Hugging Face, file by file,
# exactly as published (no conversion): the engine loads it unchanged.
#
#   scripts/download_model.sh [REPO] [DEST]
#   REPO  default Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice
#         (also: Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice, Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign,
#          Qwen/Qwen3-TTS-12Hz-0.6B-Base, Qwen/Qwen3-TTS-12Hz-1.7B-Base)
#   DEST  default models/<name>
# Needs curl and network access to huggingface.co. Resumes partial files.
set -euo pipefail
repo=${1:-Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice}
dest=${2:-models/${repo#*/}}
base="https://huggingface.co/${repo}/resolve/main"
files=(config.json generation_config.json model.safetensors vocab.json merges.txt
       tokenizer_config.json preprocessor_config.json
       speech_tokenizer/config.json speech_tokenizer/model.safetensors
       speech_tokenizer/preprocessor_config.json)
command -v curl >/dev/null || { echo "download_model.sh: curl is required" >&2; exit 1; }
mkdir -p "$dest/speech_tokenizer"
for f in "${files[@]}"; do
    echo "fetching $repo/$f"
    curl -fL --retry 3 -C - -o "$dest/$f" "$base/$f"
done
echo "model ready in $dest"
