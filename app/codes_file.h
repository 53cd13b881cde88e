/*
 * codes_file.h - the plain-text codes format of --codes-out / --codes-in:
 * one frame per line, 16 decimal integers separated by single spaces or
 * tabs. Blank lines and lines starting with '#' are ignored on input. The
 * reader is strict (the file may come from anywhere): each line must hold
 * exactly 16 integers in [0, 65535], at most 1,000,000 frames; the message
 * names the file, line and problem. Range against the codebook size is
 * checked by the decoder.
 */
#ifndef QTTS_APP_CODES_FILE_H
#define QTTS_APP_CODES_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "qwen3_tts.h"

int qtts_codes_write_frame(FILE *f, const int32_t codes[QTTS_NUM_CODEBOOKS]);

/* Returns 0 and a malloc'd [n_frames, 16] array, or non-zero with msg set. */
int qtts_codes_read(const char *path, int32_t **codes, int *n_frames, char *msg, size_t msglen);

double qtts_cli_now(void);

#endif
