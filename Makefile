# qwen3-tts - the only build entry point.
#
#   make            build build/qwen3-tts (CPU)
#   make test       build and run every test (tests/run.sh prints "N passed, N failed")
#   make test-asan  the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-tsan  the thread-pool, kernel and server tests under ThreadSanitizer
#   make bench-kernels  matmul weight-read GB/s per format and thread count (not a test)
#   make bench-codec  codec decoder ms/frame, GFLOP/s vs an FMA probe, per stage (not a test)
#   make check-arm  cross-compile for aarch64 and run the kernel tests under
#                   qemu (needs gcc-aarch64-linux-gnu; qemu-user optional)
#   make check-isa-emu  the AVX-512/AVX-VNNI kernels' logic on an AVX2 CPU
#   make cuda       build build-cuda/qwen3-tts with the CUDA backend (needs nvcc)
#   make test-cuda  the CUDA op-parity and end-to-end tests (a GPU; skips without one)
#   make cuda-mm-probe  candidate activation reads for the device matmul, timed and bit-checked on a GPU
#   make check-conv-emu  the AVX-512 conv kernels' logic on an AVX2 CPU
#   make fuzz-wav   libFuzzer (clang) on the WAV parser + resampler for FUZZ_TIME s
#   make fuzz-http / fuzz-json   libFuzzer on the server's HTTP head parser /
#                   JSON request validation for FUZZ_TIME s each (fuzz-server: both)
#   make fuzz-st / fuzz-config / fuzz-voice / fuzz-tokenizer   libFuzzer on the
#                   safetensors reader, the config reader, voice profiles and the
#                   text tokenizer for FUZZ_TIME s each (fuzz-files: all four)
#   make clean
#
# Every src/**/*.c goes into build/libqtts.a; every tests/unit/test_*.c is a
# separate test executable linked against it.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
# -ffp-contract=off: no silent fusing of a*b+c, so the kernels' documented
# accumulation orders (src/kernels/kernels_impl.h) hold on every compiler.
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Wshadow -Wno-unused-parameter \
              -Werror=implicit-function-declaration -Werror=incompatible-pointer-types \
              -ffp-contract=off -Iinclude -Isrc -Iapp -pthread
CFLAGS  ?= $(OPT)
LDLIBS  = -lutf8proc -lsndfile -lsoxr -lsonic -lm -pthread
SAN_FLAGS = -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
            -fsanitize=float-cast-overflow -fno-sanitize-recover=undefined

SRC      := $(sort $(shell find src -name '*.c'))
APP_SRC  := $(sort $(wildcard app/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))

OBJ      := $(SRC:%.c=$(BUILD)/%.o)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libqtts.a
BIN      := $(BUILD)/qwen3-tts
# The benchmarks (tools/, not tests) are part of `all`, so that a plain
# `make` never leaves a stale one behind to be compared with a fresh one.
BENCH_BIN := $(BUILD)/bench_kernels $(BUILD)/bench_codec $(BUILD)/bench_backend \
             $(BUILD)/bench_encoder

.PHONY: all test test-asan test-tsan test-some bench-kernels bench-codec bench-encoder check-arm check-isa-emu check-conv-emu fuzz-wav fuzz-http fuzz-json fuzz-server fuzz-st fuzz-config fuzz-voice fuzz-tokenizer fuzz-files clean cuda test-cuda bench-cuda cuda-mm-probe
all: $(BIN) $(BENCH_BIN)

# Per-ISA kernel files (src/kernels/kernels_<isa>.c) are the only objects
# compiled for a specific instruction set; kernels.c picks one at run time
# from the CPU's features, so everything else stays baseline. A file for
# another architecture compiles to nothing.
TARGET_MACHINE := $(shell $(CC) -dumpmachine)
ifneq ($(filter x86_64%,$(TARGET_MACHINE)),)
$(BUILD)/%_avx2.o:    ISA_FLAGS = -mavx2 -mfma -mf16c
$(BUILD)/%_avxvnni.o: ISA_FLAGS = -mavx2 -mfma -mf16c -mavxvnni
$(BUILD)/%_avx512.o:  ISA_FLAGS = -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni
$(BUILD)/%_avx512bf16.o: ISA_FLAGS = -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512bf16
endif
ifneq ($(filter aarch64%,$(TARGET_MACHINE)),)
$(BUILD)/%_neondot.o: ISA_FLAGS = -march=armv8.2-a+dotprod
$(BUILD)/%_neonbf16.o: ISA_FLAGS = -march=armv8.2-a+bf16
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(ISA_FLAGS) -MMD -MP -c $< -o $@

$(LIB): $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(APP_OBJ) $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $(APP_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/harness.h tests/golden_util.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Itests -DQTTS_FIXTURES='"tests/fixtures"' \
	    -DQTTS_BIN='"$(abspath $(BIN))"' -o $@ $< $(LIB) $(LDLIBS)

test: $(BIN) $(TEST_BIN)
	@tests/run.sh $(TEST_BIN)

test-asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" test

# ThreadSanitizer on the tests that exercise threads: the library is rebuilt
# with TSan and only test_thread* / test_kernels* (the pool),
# test_http* / test_request* / test_server* (the server), the two
# voice-cloning encoders (their convs, ELUs and quantizer on the pool) and
# test_overlap (the codec on a lent worker beside generation) run.
TSAN_FLAGS = -O1 -fno-omit-frame-pointer -fsanitize=thread
test-tsan:
	$(MAKE) BUILD=build-tsan CFLAGS="$(TSAN_FLAGS)" test-some \
	    TEST_ONLY="test_thread% test_kernels% test_http% test_request% test_server% \
	               test_codec_encoder% test_speaker_encoder% test_overlap%"

test-some: $(filter $(addprefix $(BUILD)/tests/,$(TEST_ONLY)),$(TEST_BIN))
	@tests/run.sh $^

# Matmul micro-benchmark (tools/bench_kernels.c): weight-read GB/s per
# format and thread count next to a memory-bandwidth probe. Not a test.
BENCH_ARGS ?=
$(BUILD)/bench_kernels: tools/bench_kernels.c $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench-kernels: $(BUILD)/bench_kernels
	$< $(BENCH_ARGS)

# Codec decoder benchmark (tools/bench_codec.c) on a full-size model
# (BENCH_ARGS="--model DIR --frames N ..."). Not a test.
$(BUILD)/bench_codec: tools/bench_codec.c $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench-codec: $(BUILD)/bench_codec
	$< $(BENCH_ARGS)

# Voice-cloning encoders (tools/bench_encoder.c) of a full-size Base model
# (BENCH_ARGS="--model DIR --seconds S ..."). Not a test.
$(BUILD)/bench_encoder: tools/bench_encoder.c $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench-encoder: $(BUILD)/bench_encoder
	$< $(BENCH_ARGS)

# The AVX-512 and AVX-VNNI kernels on CPUs without them: both files built
# against scalar stand-ins for their intrinsics (tests/isa_emu.h) and run as
# extra paths of test_kernels, bit for bit against the reference orders.
# Checks their lane logic, not the hardware. x86-64 hosts with AVX2.
EMU_FLAGS = -mavx2 -mfma -mf16c -Wno-psabi -include tests/isa_emu.h
$(BUILD)/emu/kernels_avx512_emu.o: src/kernels/kernels_avx512.c tests/isa_emu.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(EMU_FLAGS) -Dqtts_isa_avx512=qtts_isa_avx512_emu -MMD -MP -c $< -o $@
$(BUILD)/emu/kernels_avxvnni_emu.o: src/kernels/kernels_avxvnni.c src/kernels/kernels_avx2.c tests/isa_emu.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(EMU_FLAGS) -Dqtts_isa_avxvnni=qtts_isa_avxvnni_emu -MMD -MP -c $< -o $@
$(BUILD)/emu/test_kernels_emu: tests/unit/test_kernels.c $(BUILD)/emu/kernels_avx512_emu.o \
                               $(BUILD)/emu/kernels_avxvnni_emu.o $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Itests -DQTTS_TEST_ISA_EMU -o $@ $^ $(LDLIBS)

check-isa-emu: $(BUILD)/emu/test_kernels_emu
	@tests/run.sh $<

# The same for the AVX-512 conv file: built on tests/conv_isa_emu.h and run
# as an extra path of test_kernels_conv, bit for bit against the scalar table.
CONV_EMU_FLAGS = -mavx2 -mfma -mf16c -Wno-psabi -include tests/conv_isa_emu.h
$(BUILD)/emu/conv_avx512_emu.o: src/kernels/conv_avx512.c tests/conv_isa_emu.h tests/isa_emu.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) $(CONV_EMU_FLAGS) -Dqtts_conv_isa_avx512=qtts_conv_isa_avx512_emu -MMD -MP -c $< -o $@
$(BUILD)/emu/test_kernels_conv_emu: tests/unit/test_kernels_conv.c $(BUILD)/emu/conv_avx512_emu.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Itests -DQTTS_TEST_CONV_EMU -o $@ $^ $(LDLIBS)

check-conv-emu: $(BUILD)/emu/test_kernels_conv_emu
	@tests/run.sh $<

# the emulated objects' header dependencies (conv_impl.h, kernels_impl.h, ...)
-include $(BUILD)/emu/kernels_avx512_emu.d $(BUILD)/emu/kernels_avxvnni_emu.d \
         $(BUILD)/emu/conv_avx512_emu.d

# aarch64 cross check: the library compiled with aarch64-linux-gnu-gcc
# (-idirafter lets it see the host's arch-independent library headers),
# then the kernel and thread tests linked statically and run under
# qemu-aarch64 when it is installed (its "max" CPU has the dot product).
ARM_CC    ?= aarch64-linux-gnu-gcc
ARM_BUILD ?= build-arm
ARM_TESTS  = $(ARM_BUILD)/tests/test_kernels $(ARM_BUILD)/tests/test_kernels_conv \
             $(ARM_BUILD)/tests/test_thread
check-arm:
	$(MAKE) CC=$(ARM_CC) BUILD=$(ARM_BUILD) CFLAGS="$(OPT) -idirafter /usr/include" \
	    LDLIBS="-static -lm -pthread" $(ARM_BUILD)/libqtts.a $(ARM_TESTS)
	@if command -v qemu-aarch64 >/dev/null 2>&1; then \
	    for t in $(ARM_TESTS); do qemu-aarch64 -cpu max $$t || exit 1; done; \
	else echo "check-arm: qemu-aarch64 not installed, compiled only"; fi

# libFuzzer harnesses: built with clang from the sources they exercise;
# new corpus entries go to $(FUZZ_BUILD)/corpus-*, the committed seeds are
# read only.
FUZZ_CC    ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME  ?= 60
FUZZ_FLAGS  = -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Iinclude -Isrc \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_OPTS   = -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=2 -rss_limit_mb=1024 \
              -malloc_limit_mb=256 -print_final_stats=1

$(FUZZ_BUILD)/fuzz_wav: tests/fuzz/fuzz_wav.c src/io/audio.c src/io/audio.h src/base/base.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_wav.c src/io/audio.c src/base/base.c \
	    -lsndfile -lsoxr -lm

fuzz-wav: $(FUZZ_BUILD)/fuzz_wav
	@mkdir -p $(FUZZ_BUILD)/corpus-wav
	$< $(FUZZ_OPTS) $(FUZZ_BUILD)/corpus-wav tests/fuzz/corpus/wav

$(FUZZ_BUILD)/fuzz_http: tests/fuzz/fuzz_http.c src/server/http.c src/server/http.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_http.c src/server/http.c

$(FUZZ_BUILD)/fuzz_json_request: tests/fuzz/fuzz_json_request.c src/server/request.c src/server/request.h \
                                 src/base/json.c src/base/base.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_json_request.c src/server/request.c \
	    src/base/json.c src/base/base.c -lm

fuzz-http: $(FUZZ_BUILD)/fuzz_http
	@mkdir -p $(FUZZ_BUILD)/corpus-http
	$< $(FUZZ_OPTS) -dict=tests/fuzz/http.dict $(FUZZ_BUILD)/corpus-http tests/fuzz/corpus/http

fuzz-json: $(FUZZ_BUILD)/fuzz_json_request
	@mkdir -p $(FUZZ_BUILD)/corpus-json
	$< $(FUZZ_OPTS) $(FUZZ_BUILD)/corpus-json tests/fuzz/corpus/json_request

fuzz-server: fuzz-http fuzz-json

# Model-file and text parsers: the parser under test is built with the
# fuzzer's coverage and sanitizers; what it calls beyond that (allocation,
# half floats, the thread pool) comes from the normal library build.
FUZZ_LIBS = $(LIB) $(LDLIBS)

$(FUZZ_BUILD)/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c tests/fuzz/fuzz_memfd.h src/io/safetensors.c \
                                src/base/json.c $(LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_safetensors.c src/io/safetensors.c \
	    src/base/json.c $(FUZZ_LIBS)

$(FUZZ_BUILD)/fuzz_config: tests/fuzz/fuzz_config.c src/io/config.c src/base/json.c $(LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_config.c src/io/config.c src/base/json.c \
	    $(FUZZ_LIBS)

$(FUZZ_BUILD)/fuzz_voice: tests/fuzz/fuzz_voice.c tests/fuzz/fuzz_memfd.h src/engine/voice.c \
                          src/io/safetensors.c src/base/json.c $(LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_voice.c src/engine/voice.c \
	    src/io/safetensors.c src/base/json.c $(FUZZ_LIBS)

$(FUZZ_BUILD)/fuzz_tokenizer: tests/fuzz/fuzz_tokenizer.c src/model/tokenizer.c \
                              src/model/tokenizer_unicode.c src/base/json.c $(LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_tokenizer.c src/model/tokenizer.c \
	    src/model/tokenizer_unicode.c src/base/json.c $(FUZZ_LIBS)

fuzz-st: $(FUZZ_BUILD)/fuzz_safetensors
	@mkdir -p $(FUZZ_BUILD)/corpus-st
	$< $(FUZZ_OPTS) -dict=tests/fuzz/safetensors.dict $(FUZZ_BUILD)/corpus-st tests/fuzz/corpus/safetensors

fuzz-config: $(FUZZ_BUILD)/fuzz_config
	@mkdir -p $(FUZZ_BUILD)/corpus-config
	$< $(FUZZ_OPTS) -dict=tests/fuzz/config.dict $(FUZZ_BUILD)/corpus-config tests/fuzz/corpus/config

fuzz-voice: $(FUZZ_BUILD)/fuzz_voice
	@mkdir -p $(FUZZ_BUILD)/corpus-voice
	$< $(FUZZ_OPTS) -dict=tests/fuzz/safetensors.dict $(FUZZ_BUILD)/corpus-voice tests/fuzz/corpus/voice

fuzz-tokenizer: $(FUZZ_BUILD)/fuzz_tokenizer
	@mkdir -p $(FUZZ_BUILD)/corpus-tokenizer
	$< $(FUZZ_OPTS) $(FUZZ_BUILD)/corpus-tokenizer tests/fuzz/corpus/tokenizer

fuzz-files: fuzz-st fuzz-config fuzz-voice fuzz-tokenizer

clean:
	rm -rf build build-asan build-tsan build-arm $(FUZZ_BUILD) $(CUDA_BUILD)

-include $(OBJ:.o=.d) $(APP_OBJ:.o=.d)

# ---- CUDA backend (src/backend/cuda, docs/BACKENDS.md) ----------------------
# make cuda / test-cuda / bench-cuda re-run make with BUILD=$(CUDA_BUILD) and
# QTTS_CUDA=1: the same C sources plus the .cu files (nvcc), QTTS_HAVE_CUDA
# defined (only src/backend/backend.c reads it) and the CUDA runtime linked.
# CUDA_ARCH: Hopper machine code (sm_90a) plus compute_80 PTX, which the
# driver compiles at start on any other GPU of compute capability >= 8.0.
# --fmad=false keeps a*b+c unfused, like the C code's -ffp-contract=off.
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(shell command -v nvcc 2>/dev/null || echo $(CUDA_HOME)/bin/nvcc)
CUDA_ARCH  ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=compute_80
NVCCFLAGS  ?= -O3 -std=c++17 --fmad=false -Xcompiler -Wall
CUDA_BUILD ?= build-cuda
CU_SRC     := $(sort $(wildcard src/backend/cuda/*.cu))
CU_OBJ     := $(CU_SRC:%.cu=$(BUILD)/%.o)

ifeq ($(QTTS_CUDA),1)
CFLAGS_BASE += -DQTTS_HAVE_CUDA
LDLIBS      += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++ -ldl -lrt
$(LIB): $(CU_OBJ)
endif

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(CUDA_ARCH) -Iinclude -Isrc -MMD -MP -c $< -o $@

$(BUILD)/tests/test_cuda_ops: tests/cuda/test_cuda_ops.c tests/harness.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Itests -DQTTS_FIXTURES='"tests/fixtures"' -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench_backend: tools/bench_backend.c $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

cuda:
	$(MAKE) BUILD=$(CUDA_BUILD) QTTS_CUDA=1 $(CUDA_BUILD)/qwen3-tts

test-cuda:
	$(MAKE) BUILD=$(CUDA_BUILD) QTTS_CUDA=1 $(CUDA_BUILD)/qwen3-tts $(CUDA_BUILD)/tests/test_cuda_ops
	$(CUDA_BUILD)/tests/test_cuda_ops

# Per-frame timings of a backend on a model directory (not a test), e.g.
#   make bench-cuda BENCH_MODEL=/path/to/Qwen3-TTS-12Hz-0.6B-CustomVoice
BENCH_MODEL ?= tests/fixtures/models/cv06
BENCH_BACKEND_ARGS ?= --backend cuda
bench-cuda:
	$(MAKE) BUILD=$(CUDA_BUILD) QTTS_CUDA=1 $(CUDA_BUILD)/bench_backend
	$(CUDA_BUILD)/bench_backend $(BENCH_MODEL) $(BENCH_BACKEND_ARGS)

# Candidate activation reads for the device matmul against k_mm (a GPU tool,
# tools/cuda_mm_probe.cu; it includes ops_mm.cu and needs nothing else).
cuda-mm-probe: $(CUDA_BUILD)/cuda_mm_probe
$(CUDA_BUILD)/cuda_mm_probe: tools/cuda_mm_probe.cu src/backend/cuda/ops_mm.cu src/backend/cuda/common.cuh src/backend/cuda/layout.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(CUDA_ARCH) -Iinclude -Isrc -o $@ $<

-include $(CU_OBJ:.o=.d)
