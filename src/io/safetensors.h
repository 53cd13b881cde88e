/*
 * safetensors.h - mmap'd, bounds-checked safetensors reader.
 *
 * A model file is hostile input. qtts_st_open validates, in this order and
 * before any allocation sized by the header: file size >= 8; header length
 * N with 2 <= N <= 100,000,000 and 8+N <= file size (checked add); first
 * header byte '{'; header is valid UTF-8 and strict JSON (our json.h, which
 * rejects duplicate keys); every entry is an object with exactly "dtype",
 * "shape", "data_offsets"; dtype in the whitelist; rank <= 8; dims and
 * offsets non-negative integers < 2^53; numel*elsize computed with overflow
 * checks and equal to end-begin; after sorting by begin, the ranges tile
 * the data area exactly (no overlap, no gap) and end at EOF (no trailing
 * bytes). "__metadata__" must be an object of string values. Parse-time
 * caps: at most 16384 tensors per file, strings of at most 64 KiB.
 * Every error is one line: "<path>: <rule broken> (<detail>)".
 *
 * Quantized model files (written by `qwen3-tts quantize`, docs/QUANT.md)
 * are ordinary safetensors files whose "__metadata__" holds
 * QTTS_ST_QUANT_KEY = a format version. Only in such a file may a tensor
 * have dtype "Q8_0" or "Q4_0" (kernels/quant.h), and then only with rank
 * 2 and shape [rows > 0, cols > 0, cols % 32 == 0]. Version "2" (what this
 * build writes) stores each row in the CPU's packed layout of quant.h:
 * exactly rows * qtts_packed_row_bytes(cols) bytes, mapped and used in
 * place; version "1" stores the plain blocks, exactly rows * cols/32 *
 * block-size bytes (repacked when the model is loaded). After the tiling
 * check every block is read once, the padding blocks of packed rows too:
 * its binary16 scale must be finite and, in Q8_0, no code may be -128. A
 * file with the key but another version is refused.
 *
 * The file is mapped PROT_READ/MAP_PRIVATE and the fd kept open for the
 * lifetime of the handle; rewriting a mapped file in place is unsupported.
 */
#ifndef QTTS_SAFETENSORS_H
#define QTTS_SAFETENSORS_H

#include "../base/base.h"

typedef enum {
    QTTS_DT_F32,
    QTTS_DT_F16,
    QTTS_DT_BF16,
    QTTS_DT_I64,
    QTTS_DT_I32,
    QTTS_DT_I8,
    QTTS_DT_U8,
    /* ---- quantized block formats (layout in kernels/quant.h) ----
     * Produced in memory by qtts_mat_quantize, and accepted in files only
     * when the file carries the quantized-model marker (above). Their
     * dtype strings are "Q8_0" and "Q4_0"; qtts_dtype_size() is 0 for them
     * (a block holds 32 elements; see qtts_mat_row_bytes in
     * kernels/kernels.h). */
    QTTS_DT_Q8_0,
    QTTS_DT_Q4_0,
} qtts_dtype;

#define QTTS_MAX_RANK 8

/* The "__metadata__" key that marks a quantized model file, and the one
 * format version this build reads. */
#define QTTS_ST_QUANT_KEY "qwen3_tts.quantized"
#define QTTS_ST_QUANT_VERSION "2"         /* packed rows: written and read */
#define QTTS_ST_QUANT_VERSION_PLAIN "1"   /* plain blocks: read */

typedef struct {
    const char *name;            /* NUL-terminated, owned by the file handle */
    qtts_dtype dtype;
    int rank;
    int64_t shape[QTTS_MAX_RANK];
    uint64_t numel;
    uint64_t nbytes;
    const void *data;            /* points into the mapping; read-only */
    bool packed;                 /* Q8_0/Q4_0 rows in the packed layout (version 2) */
} qtts_tensor;

const char *qtts_dtype_name(qtts_dtype dt);
size_t qtts_dtype_size(qtts_dtype dt);

/* One file. */
typedef struct qtts_st_file qtts_st_file;
qtts_status qtts_st_open(const char *path, qtts_st_file **out, qtts_err *err);
/* The same on a descriptor the caller opened (say with openat and
 * O_NOFOLLOW); name is for messages. The file takes fd: it is closed by
 * qtts_st_close, or before a failed call returns. */
qtts_status qtts_st_open_fd(int fd, const char *name, qtts_st_file **out, qtts_err *err);
void qtts_st_close(qtts_st_file *f);              /* NULL ok */
size_t qtts_st_count(const qtts_st_file *f);
const qtts_tensor *qtts_st_at(const qtts_st_file *f, size_t i);  /* sorted by name */
const qtts_tensor *qtts_st_find(const qtts_st_file *f, const char *name);
const char *qtts_st_path(const qtts_st_file *f);
/* A "__metadata__" value, or NULL when the key is absent. */
const char *qtts_st_metadata(const qtts_st_file *f, const char *key);

/* A set of files that together hold a model: either "<dir>/<stem>.safetensors"
 * or the shards listed by "<dir>/<stem>.safetensors.index.json"
 * ({"weight_map": {name: file}}; shard names must be plain file names, no
 * '/' or '..'). A tensor name present in two shards is an error. */
typedef struct qtts_st_set qtts_st_set;
qtts_status qtts_st_set_open(const char *dir, const char *stem, qtts_st_set **out,
                             qtts_err *err);
void qtts_st_set_close(qtts_st_set *s);           /* NULL ok */
const qtts_tensor *qtts_st_set_find(const qtts_st_set *s, const char *name);
size_t qtts_st_set_count(const qtts_st_set *s);
const qtts_tensor *qtts_st_set_at(const qtts_st_set *s, size_t i);   /* sorted by name */
/* The file that was opened: the single .safetensors or the .index.json. */
const char *qtts_st_set_path(const qtts_st_set *s);
/* A "__metadata__" value of the set's first file, or NULL. */
const char *qtts_st_set_metadata(const qtts_st_set *s, const char *key);

/* Scan every F32/F16/BF16 tensor of the set for infinities and NaNs (the
 * reader does not look at values; safetensors files may hold any bits).
 * QTTS_ERR_FORMAT naming the file, the tensor and the first such element.
 * Reads every byte of those tensors: opt-in (--check-weights). */
qtts_status qtts_st_set_check_finite(const qtts_st_set *s, qtts_err *err);

/* Drop the resident pages of t's data from this process (madvise
 * MADV_DONTNEED on the whole pages inside its byte range): for a tensor
 * that was copied or converted at load and is not read again. The
 * mapping stays valid; a later read faults the pages back in from the
 * file. A no-op where the platform lacks it. */
void qtts_tensor_release(const qtts_tensor *t);

/* Look up a tensor that must exist with the given dtype (or any dtype when
 * dtype_mask is 0; else a bit mask of 1u<<qtts_dtype) and shape; dims
 * beyond rank are ignored. On failure returns NULL and sets err to e.g.
 * "model.safetensors: tensor talker.model.norm.weight: shape [32] != expected [64]". */
const qtts_tensor *qtts_st_expect(const qtts_st_set *s, const char *name, unsigned dtype_mask,
                                  int rank, const int64_t *shape, qtts_err *err);

/* Convenience: copy/convert a tensor's elements to f32 (F32/F16/BF16 only;
 * any other dtype is a programmer error). Tensor data need not be aligned:
 * the reader only guarantees what the file's layout gives. */
void qtts_tensor_to_f32(const qtts_tensor *t, float *out);

/* A tensor's elements as f32 for reading: the mapping itself when it is
 * F32 and 4-byte aligned (no copy), else a converted qtts_malloc copy that
 * is also stored in *owned for the caller to free (*owned is NULL for a
 * view). NULL when the copy cannot be allocated. */
const float *qtts_tensor_f32(const qtts_tensor *t, float **owned);

#endif
