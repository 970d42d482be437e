/* ${VAR} expansion (see expand.h). */
#include "config/expand.h"

#include "base/log.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Expand ${VAR} and ${VAR:-default}.  Returns a malloc'd string, or NULL
 * with a message in err. */
char *st_config_expand_env(const char *in, char *err, size_t errn)
{
    size_t cap = strlen(in) + 64, len = 0;
    char *out = malloc(cap);
    if (!out) {
        st_format(err, errn, "out of memory");
        return NULL;
    }
    for (const char *p = in; *p;) {
        const char *piece = p;
        size_t plen = 1;
        char *val_copy = NULL;
        if (p[0] == '$' && p[1] == '{') {
            const char *close = strchr(p + 2, '}');
            if (!close) {
                st_format(err, errn, "unterminated '${' in value; hint: close it with '}'");
                free(out);
                return NULL;
            }
            const char *name = p + 2, *def = NULL;
            size_t nlen = (size_t)(close - name);
            const char *colon = memchr(name, ':', nlen);
            if (colon) {
                if (colon[1] != '-') {
                    st_format(err, errn, "unsupported '${%.*s}'; hint: write ${VAR} or "
                              "${VAR:-default}", (int)nlen, name);
                    free(out);
                    return NULL;
                }
                def = colon + 2;
                nlen = (size_t)(colon - name);
            }
            bool good = nlen > 0 && (isalpha((unsigned char)name[0]) || name[0] == '_');
            for (size_t i = 0; good && i < nlen; i++)
                good = isalnum((unsigned char)name[i]) || name[i] == '_';
            if (!good) {
                st_format(err, errn, "invalid environment variable name '%.*s' in '${'; "
                          "hint: use letters, digits and '_'", (int)nlen, name);
                free(out);
                return NULL;
            }
            char vname[128];
            /* Refused rather than cut: a cut name would read another
             * variable. */
            if (nlen >= sizeof vname) {
                st_format(err, errn, "environment variable name '%.40s...' is %zu bytes, "
                          "longer than %zu; hint: use a shorter name", name, nlen,
                          sizeof vname - 1);
                free(out);
                return NULL;
            }
            snprintf(vname, sizeof vname, "%.*s", (int)nlen, name);
            const char *v = getenv(vname);
            if (def && (!v || !*v)) {
                val_copy = strndup(def, (size_t)(close - def));
                v = val_copy;
            }
            if (!v) {
                st_format(err, errn, "undefined environment variable '%s'; "
                          "hint: set it or write ${%s:-default}", vname, vname);
                free(out);
                return NULL;
            }
            piece = v;
            plen = strlen(v);
            p = close + 1;
        } else {
            p++;
        }
        if (len + plen + 1 > cap) {
            cap = (len + plen + 1) * 2;
            char *n = realloc(out, cap);
            if (!n) {
                free(out);
                free(val_copy);
                st_format(err, errn, "out of memory");
                return NULL;
            }
            out = n;
        }
        memcpy(out + len, piece, plen);
        len += plen;
        free(val_copy);
    }
    out[len] = '\0';
    return out;
}

