/*
 * bench.h - `qwen3-tts bench` (app/bench.c): per-stage speed of a model
 * directory on this machine against probes of its memory bandwidth and
 * arithmetic peak run in the same process.
 */
#ifndef QTTS_APP_BENCH_H
#define QTTS_APP_BENCH_H

/* argv[0] is "bench". Returns the process exit code. */
int qtts_cmd_bench(int argc, char **argv);

#endif
