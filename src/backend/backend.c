/* backend.c - the registry: the only file that knows which backends exist.
 *
 * QTTS_HAVE_CUDA is set by the Makefile's CUDA build (make cuda), which
 * also compiles and links src/backend/cuda/; it appears nowhere else. */
#include "backend.h"

#include <string.h>

typedef qtts_status (*backend_open_fn)(const qtts_talker_weights *, const qtts_codec_decoder *,
                                       qtts_backend **, qtts_err *);

qtts_status qtts_backend_cpu_open(const qtts_talker_weights *talker,
                                  const qtts_codec_decoder *codec, qtts_backend **out,
                                  qtts_err *err);
#ifdef QTTS_HAVE_CUDA
qtts_status qtts_backend_cuda_open(const qtts_talker_weights *talker,
                                   const qtts_codec_decoder *codec, qtts_backend **out,
                                   qtts_err *err);
#endif

static const struct {
    const char *name;
    backend_open_fn open;
} registry[] = {
    {"cpu", qtts_backend_cpu_open},
#ifdef QTTS_HAVE_CUDA
    {"cuda", qtts_backend_cuda_open},
#endif
};

/* Backends that exist in the source tree, and how to build them in. */
static const struct {
    const char *name, *how;
} optional[] = {
    {"cuda", "build with 'make cuda'"},
};

const char *qtts_backend_names(void) {
#ifdef QTTS_HAVE_CUDA
    return "cpu, cuda";
#else
    return "cpu";
#endif
}

qtts_status qtts_backend_open(const char *name, const qtts_talker_weights *talker,
                              const qtts_codec_decoder *codec, qtts_backend **out, qtts_err *err) {
    *out = NULL;
    if (!name || !*name) name = "cpu";
    for (size_t i = 0; i < QTTS_ARRAY_LEN(registry); i++)
        if (strcmp(registry[i].name, name) == 0) return registry[i].open(talker, codec, out, err);
    for (size_t i = 0; i < QTTS_ARRAY_LEN(optional); i++)
        if (strcmp(optional[i].name, name) == 0)
            return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                             "backend '%s' is not available in this build (available: %s; %s)",
                             name, qtts_backend_names(), optional[i].how);
    return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                     "backend '%s' is not available in this build (available: %s)", name,
                     qtts_backend_names());
}

void qtts_backend_close(qtts_backend *be) {
    if (be) be->ops->destroy(be);
}
