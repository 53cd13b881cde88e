#!/usr/bin/env bash
# tools/gpu_check.sh - the CUDA backend's checks on a machine with an NVIDIA GPU, as one script
# with a time budget (a GPU lease is short, and a second start costs minutes).
#
#   tools/gpu_check.sh --out DIR (--model DIR | --manifest FILE) [--bin DIR] [--budget SECONDS]
#                      [--steps ops,parity,...]
#
# --bin: where qwen3-tts, bench_backend, tests/test_cuda_ops and cuda_mm_probe are (default
#   build-cuda: `make cuda test-cuda bench-cuda cuda-mm-probe` builds them). Binaries built on another machine can travel
#   with the .so files they need in BIN/lib (put on LD_LIBRARY_PATH).
# --model: a full-size CustomVoice 0.6B directory (bf16). --manifest: a file written by
#   `tools/reference/make_full.py --variant cv06 --save-manifest FILE`, from which the same random
#   model is written here first (numpy + scipy, no torch or qwen-tts needed).
#
# --steps: run only these (info and model always run); default all. In order, each step logged
# to DIR/<step>.log, each with its own timeout and all inside the budget (a step that would start
# past it is skipped, named in the summary):
#   ops       tests/test_cuda_ops: op parity with the CPU kernels, stages, batch identity,
#             graphs on/off, the golden codes of the five tiny models
#   mmprobe   cuda_mm_probe (`make cuda-mm-probe`, skipped when BIN lacks it): candidate
#             activation reads for the matmul, timed and bit-checked against k_mm
#   model     the full-size model from the manifest
#   parity    synth on the full-size model, CPU backend vs CUDA: greedy and sampled, bf16 and
#             int4 weights; the codes must be identical, the waveforms are compared
#   memcheck  compute-sanitizer memcheck over test_cuda_ops
#   racecheck compute-sanitizer racecheck over the sampler's test and a CP frame (the whole
#             file takes over 4 minutes under racecheck)
#   profile   ncu: each kernel's duration over bench_backend's prefill, 3 frames and a codec
#             window (batch 1 and 8), summed by kernel: where the GPU time goes; then the
#             full section set for three bf16 single-row matmuls of a talker step
#   bench     bench_backend (stage ms per frame, batch 1 / 8 / 32) and `qwen3-tts bench`
#             (TTFA, RTF) on the GPU; the CPU's bench_backend for comparison
#   server    tools/bench_server.py against `serve --backend cuda` (8 clients, batch 8)
# DIR/summary.txt lists each step's status and seconds. Exit status: 0 when every step that ran
# passed.
set -u
OUT="" MODEL="" MANIFEST="" BIN=build-cuda BUDGET=480 STEPS=all
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        --model) MODEL=$2; shift 2 ;;
        --manifest) MANIFEST=$2; shift 2 ;;
        --bin) BIN=$2; shift 2 ;;
        --budget) BUDGET=$2; shift 2 ;;
        --steps) STEPS=$2; shift 2 ;;
        *) echo "gpu_check: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
    esac
done
if [ -z "$OUT" ] || { [ -z "$MODEL" ] && [ -z "$MANIFEST" ]; }; then
    echo "gpu_check: needs --out DIR and --model DIR or --manifest FILE" >&2; exit 2
fi
mkdir -p "$OUT"
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$(cd "$BIN/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
T0=$(date +%s)
FAILED=0
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
left() { echo $((BUDGET - ($(date +%s) - T0))); }

# step NAME MAX_SECONDS MIN_SECONDS -- COMMAND...: runs COMMAND (a shell function or program)
# under timeout min(MAX, what is left of the budget), skipped when less than MIN is left.
step() {
    local name=$1 max=$2 min=$3; shift 4
    case ",$STEPS,info,model," in *",all,"*|*",$name,"*) ;; *) return 0 ;; esac
    local l; l=$(left)
    if [ "$l" -lt "$min" ]; then
        echo "$name: SKIPPED (${l}s of the budget left, needs $min)" | tee -a "$SUMMARY"; return 1
    fi
    local t=$max; [ "$l" -lt "$t" ] && t=$l
    local s; s=$(date +%s)
    echo "== $name (timeout ${t}s) ==" >&2
    # a child bash, so that the step may be one of the functions below (exported)
    timeout -k 5 "$t" bash -c '"$@"' step "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    local d=$(( $(date +%s) - s ))
    if [ $rc -eq 0 ]; then echo "$name: ok (${d}s)" | tee -a "$SUMMARY"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "$name: TIMED OUT after ${d}s" | tee -a "$SUMMARY"; FAILED=1
    else echo "$name: FAILED rc=$rc (${d}s)" | tee -a "$SUMMARY"; FAILED=1; fi
    tail -n 40 "$OUT/$name.log" >&2
    return $rc
}

info() {
    nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    nproc; grep -m1 'model name' /proc/cpuinfo; grep -o -m1 'avx512[a-z_0-9]*' /proc/cpuinfo | head -3
    "$BIN/qwen3-tts" --version 2>&1 || true
    ldd "$BIN/qwen3-tts" | grep -i 'not found' && return 1
    return 0
}

make_model() {
    python3 tools/reference/make_full.py --from-manifest "$MANIFEST" --out "$MODEL" --tokenizer-dir tests/fixtures/tokenizer
}

TEXT="The quick brown fox jumps over the lazy dog, and the engine keeps the same codes on the GPU."
# parity_one TAG ARGS...: CPU and CUDA synth with the same arguments; identical codes required.
parity_one() {
    local tag=$1; shift
    local c="$OUT/parity-$tag"
    "$BIN/qwen3-tts" synth -m "$MODEL" -s vivian -t "$TEXT" --max-frames 48 --quiet --raw --f32 \
        --backend cpu --kv-cache f32 --codes-out "$c.cpu.codes" -o "$c.cpu.f32" "$@" || return 1
    "$BIN/qwen3-tts" synth -m "$MODEL" -s vivian -t "$TEXT" --max-frames 48 --quiet --raw --f32 \
        --backend cuda --codes-out "$c.cuda.codes" -o "$c.cuda.f32" "$@" || return 1
    echo "$tag: $(wc -l <"$c.cpu.codes") frames (cpu), $(wc -l <"$c.cuda.codes") frames (cuda)"
    local rc=0
    if cmp -s "$c.cpu.codes" "$c.cuda.codes"; then echo "$tag: codes identical"
    else echo "$tag: CODES DIFFER"; diff "$c.cpu.codes" "$c.cuda.codes" | head -6; rc=1; fi
    python3 - "$c.cpu.f32" "$c.cuda.f32" <<'EOF' || rc=1
import sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype="<f4"); b = np.fromfile(sys.argv[2], dtype="<f4")
n = min(len(a), len(b))
d = np.abs(a[:n] - b[:n])
print(f"  waveform: {len(a)} vs {len(b)} samples, max |diff| {d.max() if n else 0:.3g}, "
      f"rms diff {np.sqrt((d * d).mean()) if n else 0:.3g}, rms signal {np.sqrt((a * a).mean()):.3g}, "
      f"bit-identical {np.array_equal(a, b)}")
sys.exit(0 if len(a) == len(b) else 1)
EOF
    rm -f "$c.cpu.f32" "$c.cuda.f32"
    return $rc
}
parity() {
    local rc=0
    parity_one bf16-greedy --greedy || rc=1
    parity_one bf16-sampled --seed 7 || rc=1
    parity_one int4-greedy --greedy --quant int4 || rc=1
    parity_one int8-sampled --seed 3 --quant int8 || rc=1
    return $rc
}

bench() {
    local rc=0
    for b in 1 8 32; do
        echo "--- bench_backend cuda, batch $b"
        "$BIN/bench_backend" "$MODEL" --backend cuda --frames 64 --batch $b --window 300 || rc=1
    done
    echo "--- qwen3-tts bench --backend cuda"
    "$BIN/qwen3-tts" bench -m "$MODEL" --backend cuda --frames 100 --runs 3 -q || rc=1
    echo "--- qwen3-tts bench --backend cuda --quant int4"
    "$BIN/qwen3-tts" bench -m "$MODEL" --backend cuda --quant int4 --frames 100 --runs 3 -q || rc=1
    echo "--- bench_backend cpu ($(nproc) threads), batch 1"
    "$BIN/bench_backend" "$MODEL" --backend cpu --frames 16 --threads "$(nproc)" --window 50 || rc=1
    return $rc
}

profile() {
    local rc=0
    for b in 1 8; do
        echo "--- ncu over bench_backend cuda, batch $b, 3 frames"
        ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
            --print-units base --log-file "$OUT/ncu-b$b.csv" \
            "$BIN/bench_backend" "$MODEL" --backend cuda --frames 3 --batch $b --window 300 >/dev/null || rc=1
        python3 tools/ncu_sum.py "$OUT/ncu-b$b.csv" || rc=1
    done
    # the bf16 single-row matmul in detail (throughput, occupancy, stall reasons): launches
    # 21-23 of k_mm<CU_BF16, 1>, i.e. matrices of the first frame's talker step
    echo "--- ncu --set full over three k_mm<1, 1> launches"
    ncu --clock-control none --set full --kernel-name-base mangled -k _Z4k_mmILi1ELi1EEv6MMArgs \
        --launch-skip 20 --launch-count 3 --print-units base \
        "$BIN/bench_backend" "$MODEL" --backend cuda --frames 2 --window 1 >"$OUT/ncu-mm.txt" 2>&1 || rc=1
    grep -E "k_mm|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers|Warp Cycles Per Issued|Stall|L1/TEX Hit|L2 Hit|Block Limit" \
        "$OUT/ncu-mm.txt" | head -80
    return $rc
}

server() {
    python3 tools/bench_server.py --bin "$BIN/qwen3-tts" -m "$MODEL" --backend cuda --clients 8 --batch 8 \
        --frames 60 --rounds 2
}

sanitize() {
    local tool=$1
    shift
    compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 "$BIN/tests/test_cuda_ops" "$@"
}

export OUT MODEL MANIFEST BIN TEXT
export -f info make_model parity_one parity bench profile server sanitize
step info 30 10 -- info
step ops 150 30 -- "$BIN/tests/test_cuda_ops"
[ -x "$BIN/cuda_mm_probe" ] && step mmprobe 60 20 -- "$BIN/cuda_mm_probe"
if [ -n "$MANIFEST" ]; then
    MODEL=${MODEL:-/tmp/gpu_check_model}; export MODEL
    step model 120 60 -- make_model
fi
step parity 150 60 -- parity
step memcheck 240 60 -- sanitize memcheck
step racecheck 120 60 -- sanitize racecheck test_sample test_cp_frame
step profile 150 60 -- profile
step bench 150 60 -- bench
step server 90 45 -- server
echo "total $(( $(date +%s) - T0 ))s of a ${BUDGET}s budget" | tee -a "$SUMMARY"
exit $FAILED
