#include "params.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

extern char **environ;

typedef enum { PT_STR, PT_INT, PT_SIZE, PT_MS } param_type_t;

static const struct param_desc {
    const char *env;
    param_type_t type;
    const char *def;
    const char *desc;
    size_t offset;
} param_table[] = {
#define CHORUS_PARAM(field, type, def, desc) \
    {"CHORUS_" #field, PT_##type, def, desc, offsetof(chorus_params_t, field)},
#include "params.def"
#undef CHORUS_PARAM
};
#define PARAM_COUNT (sizeof(param_table) / sizeof(param_table[0]))

/* The table spells fields in lower case; environment names are upper case. */
static void param_env_name(const struct param_desc *d, char *out, size_t len)
{
    size_t i = 0;
    for (; d->env[i] && i + 1 < len; i++) out[i] = (char)toupper((unsigned char)d->env[i]);
    out[i] = 0;
}

int params_parse_int(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (errno || end == text || *end) return -1;
    *out = v;
    return 0;
}

/* A number followed by an optional unit whose multiplier comes from `units`. */
static int parse_scaled(const char *text, const char *const *names, const double *mult, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0) return -1;
    while (*end == ' ') end++;
    double m = 1;
    if (*end) {
        int found = 0;
        for (int i = 0; names[i]; i++)
            if (strcasecmp(end, names[i]) == 0) {
                m = mult[i];
                found = 1;
                break;
            }
        if (!found) return -1;
    }
    double r = v * m;
    if (r > 9.2e18) return -1;
    *out = (int64_t)(r + 0.5);
    return 0;
}

int params_parse_size(const char *text, int64_t *out)
{
    static const char *const names[] = {"B", "K", "KB", "KiB", "M", "MB", "MiB", "G", "GB", "GiB", NULL};
    static const double mult[] = {1, 1 << 10, 1 << 10, 1 << 10, 1 << 20, 1 << 20, 1 << 20, 1 << 30, 1 << 30, 1 << 30};
    return parse_scaled(text, names, mult, out);
}

int params_parse_ms(const char *text, int64_t *out)
{
    static const char *const names[] = {"ms", "s", "m", "min", "h", NULL};
    static const double mult[] = {1, 1000, 60000, 60000, 3600000};
    return parse_scaled(text, names, mult, out);
}

/* A size whose default is "auto" also takes that word (as -1, resolved where the knob is used). */
static int param_takes_auto(const struct param_desc *d) { return d->type == PT_SIZE && strcmp(d->def, "auto") == 0; }

static int param_set(const struct param_desc *d, chorus_params_t *p, const char *text)
{
    void *slot = (char *)p + d->offset;
    switch (d->type) {
    case PT_STR: {
        char *copy = strdup(text);
        if (!copy) return -1;
        *(char **)slot = copy;
        return 0;
    }
    case PT_INT: return params_parse_int(text, (int64_t *)slot);
    case PT_SIZE:
        if (param_takes_auto(d) && strcasecmp(text, "auto") == 0) {
            *(int64_t *)slot = -1;
            return 0;
        }
        return params_parse_size(text, (int64_t *)slot);
    case PT_MS: return params_parse_ms(text, (int64_t *)slot);
    }
    return -1;
}

static const char *param_type_hint(const struct param_desc *d)
{
    switch (d->type) {
    case PT_INT: return "an integer";
    case PT_SIZE:
        return param_takes_auto(d) ? "auto or a size such as 65536, 64K or 4M" : "a size such as 65536, 64K or 4M";
    case PT_MS: return "a duration such as 500ms, 30s or 10m";
    default: return "a string";
    }
}

chorus_result_t params_load(chorus_params_t *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < PARAM_COUNT; i++) {
        const struct param_desc *d = &param_table[i];
        char name[64];
        param_env_name(d, name, sizeof(name));
        const char *env = getenv(name);
        if (param_set(d, p, d->def) != 0) {
            params_free(p);
            return CHORUS_ERR_INTERNAL;
        }
        if (env && (d->type == PT_STR || *env)) {
            if (d->type == PT_STR) free(*(char **)((char *)p + d->offset));
            if (param_set(d, p, env) != 0) {
                snprintf(err, errlen, "%s=\"%s\" is not valid: expected %s", name, env, param_type_hint(d));
                params_free(p);
                return CHORUS_ERR_INVALID_ARGUMENT;
            }
        }
    }
    log_configure(p->log_level, p->log_subsys);
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "CHORUS_", 7) != 0) continue;
        size_t len = strcspn(*e, "=");
        int known = 0;
        for (size_t i = 0; i < PARAM_COUNT && !known; i++) {
            char name[64];
            param_env_name(&param_table[i], name, sizeof(name));
            known = strlen(name) == len && strncmp(name, *e, len) == 0;
            if (known && strcmp(name, "CHORUS_UNIQUE_ID") != 0)
                LOG_INFO(LOG_SUB_INIT, "%s set by the environment", *e);
        }
        if (!known) LOG_WARN(LOG_SUB_INIT, "unknown variable %.*s ignored (a typo? see docs/env.md)", (int)len, *e);
    }
    return CHORUS_SUCCESS;
}

void params_free(chorus_params_t *p)
{
    for (size_t i = 0; i < PARAM_COUNT; i++)
        if (param_table[i].type == PT_STR) {
            char **slot = (char **)((char *)p + param_table[i].offset);
            free(*slot);
            *slot = NULL;
        }
}

void params_dump(const chorus_params_t *p, FILE *out)
{
    for (size_t i = 0; i < PARAM_COUNT; i++) {
        const struct param_desc *d = &param_table[i];
        char name[64];
        param_env_name(d, name, sizeof(name));
        const void *slot = (const char *)p + d->offset;
        if (d->type == PT_STR)
            fprintf(out, "%-26s = \"%s\"%s\n", name, *(char *const *)slot, getenv(name) ? " (env)" : "");
        else if (d->type == PT_SIZE && *(const int64_t *)slot < 0)
            fprintf(out, "%-26s = auto%s\n", name, getenv(name) ? " (env)" : "");
        else
            fprintf(out, "%-26s = %lld%s\n", name, (long long)*(const int64_t *)slot, getenv(name) ? " (env)" : "");
    }
}

void params_markdown(FILE *out)
{
    fprintf(out, "# Environment knobs\n\n"
                 "Generated from `src/util/params.def` by `chorus-perf --params-md`; do not edit by hand.\n"
                 "Sizes accept K/M/G suffixes; durations accept ms, s, m and h.\n\n"
                 "| variable | kind | default | meaning |\n|---|---|---|---|\n");
    static const char *const kinds[] = {"string", "integer", "size", "duration"};
    for (size_t i = 0; i < PARAM_COUNT; i++) {
        const struct param_desc *d = &param_table[i];
        char name[64];
        param_env_name(d, name, sizeof(name));
        fprintf(out, "| `%s` | %s | `%s` | %s |\n", name, kinds[d->type], d->def, d->desc);
    }
}
