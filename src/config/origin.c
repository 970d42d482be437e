/* Where each value came from (see origin.h).  Errors point at the line
 * that set a key so that the message names the thing to edit. */
#include "config/origin.h"

#include "base/log.h"
#include "config/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_config_origin_of(const st_config *cfg, const char *section, const char *key,
                         const char **file, int *line)
{
    int idx = st_schema_index(section, key);
    const struct st_config_origin *o = idx >= 0 && cfg->origin ? &cfg->origin[idx] : NULL;
    if (o && o->src == ST_FROM_CMDLINE) {
        *file = "command line";
        *line = o->line;
    } else if (o && o->src == ST_FROM_HF && cfg->hf_config) {
        *file = cfg->hf_config;
        *line = 0;
    } else {
        *file = cfg->path ? cfg->path : "configuration";
        *line = o && o->src == ST_FROM_FILE ? o->line : 0;
    }
}

int st_config_verror(const st_config *cfg, const char *section, const char *key,
                     const char *fmt, va_list ap)
{
    const char *file;
    int line;
    st_config_origin_of(cfg, section, key, &file, &line);
    st_verror_at(file, line, fmt, ap);
    return ST_EXIT_USAGE;
}

int st_config_error(const st_config *cfg, const char *section, const char *key,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = st_config_verror(cfg, section, key, fmt, ap);
    va_end(ap);
    return rc;
}

/* Shortest %g form that reads back as the same double, so `check` output
 * fed back as a config reproduces the run exactly. */
static void format_double(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);   /* 10000, not 1e+04 */
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static void format_value(const st_config *cfg, const st_key *k, char *buf, size_t n)
{
    const void *p = st_schema_field(cfg, k);
    switch (k->type) {
    case ST_T_INT: snprintf(buf, n, "%lld", (long long)*(const int64_t *)p); break;
    case ST_T_FLOAT: format_double(buf, n, *(const double *)p); break;
    case ST_T_BOOL: snprintf(buf, n, "%s", *(const int *)p ? "true" : "false"); break;
    case ST_T_ENUM: snprintf(buf, n, "%s", st_enum_name(k->section, k->key, *(const int *)p)); break;
    case ST_T_STRING: snprintf(buf, n, "%s", *(char *const *)p ? *(char *const *)p : ""); break;
    }
}

void st_config_print(const st_config *cfg, FILE *out)
{
    char val[4096];
    int width = 0;
    for (int i = 0; i < st_schema_n; i++) {
        format_value(cfg, &st_schema[i], val, sizeof val);
        int w = (int)(strlen(st_schema[i].key) + 3 + strlen(val));
        if (w > width && w <= 48)
            width = w;
    }
    for (int s = 0; st_sections[s]; s++) {
        fprintf(out, "%s[%s]\n", s ? "\n" : "", st_sections[s]);
        for (int i = 0; i < st_schema_n; i++) {
            const st_key *k = &st_schema[i];
            if (strcmp(k->section, st_sections[s]) != 0)
                continue;
            const struct st_config_origin *o = &cfg->origin[i];
            char line[4200];
            format_value(cfg, k, val, sizeof val);
            snprintf(line, sizeof line, "%s = %s", k->key, val);
            fprintf(out, "%-*s  ; from ", width, line);
            switch (o->src) {
            case ST_FROM_PRESET: fprintf(out, "preset %s\n", cfg->model.preset); break;
            case ST_FROM_HF: fprintf(out, "%s\n", cfg->hf_config); break;
            case ST_FROM_FILE: fprintf(out, "%s:%d\n", cfg->path, o->line); break;
            case ST_FROM_CMDLINE: fprintf(out, "command line\n"); break;
            default: fprintf(out, "default\n"); break;
            }
        }
    }
}

/* The cut backs off to a UTF-8 character boundary, so that the message
 * stays valid text. */
const char *st_config_quote(const char *s, size_t len, char buf[ST_QUOTE_BUF])
{
    if (len <= ST_QUOTE_MAX) {
        snprintf(buf, ST_QUOTE_BUF, "%.*s", (int)len, s);
        return buf;
    }
    size_t cut = ST_QUOTE_MAX;
    while (cut > ST_QUOTE_MAX - 3 && ((unsigned char)s[cut] & 0xC0) == 0x80)
        cut--;
    snprintf(buf, ST_QUOTE_BUF, "%.*s...", (int)cut, s);
    return buf;
}
