/* backend.c - the registry: the only file that knows which backends exist. */
#include "backend.h"

#include <string.h>

qtts_status qtts_backend_cpu_open(const qtts_talker_weights *talker,
                                  const qtts_codec_decoder *codec, qtts_backend **out,
                                  qtts_err *err);

static const struct {
    const char *name;
    qtts_status (*open)(const qtts_talker_weights *, const qtts_codec_decoder *, qtts_backend **,
                        qtts_err *);
} registry[] = {
    {"cpu", qtts_backend_cpu_open},
};

const char *qtts_backend_names(void) { return "cpu"; }

qtts_status qtts_backend_open(const char *name, const qtts_talker_weights *talker,
                              const qtts_codec_decoder *codec, qtts_backend **out, qtts_err *err) {
    *out = NULL;
    if (!name || !*name) name = "cpu";
    for (size_t i = 0; i < QTTS_ARRAY_LEN(registry); i++)
        if (strcmp(registry[i].name, name) == 0) return registry[i].open(talker, codec, out, err);
    return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                     "backend '%s' is not available in this build (available: %s)", name,
                     qtts_backend_names());
}

void qtts_backend_close(qtts_backend *be) {
    if (be) be->ops->destroy(be);
}
