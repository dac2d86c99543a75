/* Knobs, generated from params.def. Values are read once per communicator (params_load) and then
 * travel inside the communicator; nothing else reads the environment. */
#ifndef CHORUS_PARAMS_H
#define CHORUS_PARAMS_H

#include <stdint.h>
#include <stdio.h>

#include "chorus/chorus.h"

#define PARAM_CTYPE_STR char *
#define PARAM_CTYPE_INT int64_t
#define PARAM_CTYPE_SIZE int64_t
#define PARAM_CTYPE_MS int64_t

typedef struct chorus_params {
#define CHORUS_PARAM(field, type, def, desc) PARAM_CTYPE_##type field;
#include "params.def"
#undef CHORUS_PARAM
} chorus_params_t;

/* Fill *p from the environment over the defaults. A malformed value is an error naming the variable (in
 * err); an unknown CHORUS_* variable gets a warning (likely a typo). Free with params_free(). */
chorus_result_t params_load(chorus_params_t *p, char *err, size_t errlen);
void params_free(chorus_params_t *p);

/* Parse one value of the given kind ("SIZE": "4M" -> 4194304; "MS": "1.5s" -> 1500). 0 on success. */
int params_parse_size(const char *text, int64_t *out);
int params_parse_ms(const char *text, int64_t *out);
int params_parse_int(const char *text, int64_t *out);

/* Print every knob with its current value (and whether the environment set it), or the docs/env.md table. */
void params_dump(const chorus_params_t *p, FILE *out);
void params_markdown(FILE *out);

#endif
