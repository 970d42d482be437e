/* What every part of the tokenizer.json loader shares (tokenizer_impl.h):
 * its one-line messages, whose wording says whether the file is malformed
 * (not a valid tokenizer.json) or valid but of a kind shardtrain does not
 * reproduce, and the few JSON accessors with the library's defaults. */
#include "tok/tokenizer_impl.h"

#include "base/log.h"

#include <stdlib.h>
#include <string.h>

#define SUPPORTED_HINT "shardtrain reads BPE tokenizers (GPT-2, Llama 2 and 3 families)"

int st_tok_refuse(st_tok_loader *L, const char *what, const char *name)
{
    char buf[96];
    st_error(L->path, "%s '%s' is not supported; " SUPPORTED_HINT, what,
             st_printable(name ? name : "(none)", buf, sizeof buf));
    return ST_EXIT_USAGE;
}

int st_tok_bad(st_tok_loader *L, const char *what)
{
    st_error(L->path, "%s; the file is not a valid tokenizer.json", what);
    return ST_EXIT_USAGE;
}

int st_tok_oom(st_tok_loader *L)
{
    st_error(L->path, "out of memory loading the tokenizer");
    return ST_EXIT_FAILURE;
}

const char *st_tok_type_of(json_t *o)
{
    json_t *v = json_object_get(o, "type");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An optional boolean member; dflt when absent or null. */
int st_tok_bool_member(json_t *o, const char *k, int dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

char *st_tok_dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}
