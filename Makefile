# qwen3-tts - the only build entry point.
#
#   make            build build/qwen3-tts (CPU)
#   make test       build and run every test (tests/run.sh prints "N passed, N failed")
#   make test-asan  the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make fuzz-wav   libFuzzer (clang) on the WAV parser + resampler for FUZZ_TIME s
#   make clean
#
# Every src/**/*.c goes into build/libqtts.a; every tests/unit/test_*.c is a
# separate test executable linked against it.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Wshadow -Wno-unused-parameter \
              -Werror=implicit-function-declaration -Werror=incompatible-pointer-types \
              -Iinclude -Isrc -Iapp -pthread
CFLAGS  ?= $(OPT)
LDLIBS  = -lutf8proc -lsndfile -lsoxr -lm -pthread
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

.PHONY: all test test-asan fuzz-wav clean
all: $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(APP_OBJ) $(LIB)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $(APP_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/harness.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Itests -DQTTS_FIXTURES='"tests/fixtures"' \
	    -DQTTS_BIN='"$(abspath $(BIN))"' -o $@ $< $(LIB) $(LDLIBS)

test: $(BIN) $(TEST_BIN)
	@tests/run.sh $(TEST_BIN)

test-asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" test

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

clean:
	rm -rf build build-asan $(FUZZ_BUILD)

-include $(OBJ:.o=.d) $(APP_OBJ:.o=.d)
