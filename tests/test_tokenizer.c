/* Drives src/tok/tokenizer.h for tests/tokenizer.sh and bench/tokenizer.sh,
 * which compare it with the Hugging Face `tokenizers` library
 * (tests/tokenizer_ref.py):
 *   test_tokenizer encode TOKENIZER FILE   one line of ids per line of FILE
 *                                          (special tokens added, as the
 *                                          library's encode(line) does)
 *   test_tokenizer decode TOKENIZER FILE   one line of text per line of ids
 *                                          (special tokens skipped)
 *   test_tokenizer time TOKENIZER FILE N [lines]
 *                                          encode the whole file N times as
 *                                          one text (or line by line);
 *                                          prints tokens and seconds of the
 *                                          fastest round
 * Lines split at '\n' only, as Python's str.split("\n"), and the last line
 * is kept even when empty so both sides see the same list. */
#include "base/log.h"
#include "tok/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        st_die(ST_EXIT_USAGE, "%s: cannot open", path);
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    for (size_t r; p && (r = fread(p + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap)
            p = realloc(p, cap *= 2);
    }
    fclose(f);
    if (!p)
        st_die(ST_EXIT_FAILURE, "out of memory");
    *len = n;
    return p;
}

static int encode_lines(st_tokenizer *t, const char *text, size_t n)
{
    st_token_list ids = {0};
    for (size_t start = 0;;) {
        const char *nl = memchr(text + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - text) : n;
        ids.n = 0;
        if (st_tokenizer_encode(t, text + start, end - start, 1, &ids))
            return ST_EXIT_FAILURE;
        for (size_t i = 0; i < ids.n; i++)
            printf(i ? " %u" : "%u", ids.ids[i]);
        putchar('\n');
        if (!nl)
            break;
        start = end + 1;
    }
    st_token_list_free(&ids);
    return 0;
}

/* Every line of ids ends with '\n'; an empty line is an empty list. */
static int decode_lines(st_tokenizer *t, char *text)
{
    st_token_list ids = {0};
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        ids.n = 0;
        for (char *e, *p = line; *p; p = e) {
            unsigned long v = strtoul(p, &e, 10);
            if (e == p)
                break;
            if (st_token_list_push(&ids, (uint32_t)v))
                return ST_EXIT_FAILURE;
        }
        char *out;
        size_t len;
        if (st_tokenizer_decode(t, ids.ids, ids.n, 1, &out, &len))
            return ST_EXIT_FAILURE;
        fwrite(out, 1, len, stdout);
        putchar('\n');
        free(out);
    }
    st_token_list_free(&ids);
    return 0;
}

static int time_encode(st_tokenizer *t, const char *text, size_t n, int rounds, int lines)
{
    double best = 1e300;
    size_t tokens = 0;
    st_token_list ids = {0};
    for (int r = 0; r < rounds; r++) {
        struct timespec a, b;
        ids.n = 0;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (size_t start = 0; start <= n;) {
            const char *nl = lines ? memchr(text + start, '\n', n - start) : NULL;
            size_t end = nl ? (size_t)(nl - text) : n;
            if (st_tokenizer_encode(t, text + start, end - start, 1, &ids))
                return ST_EXIT_FAILURE;
            start = end + 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        if (s < best)
            best = s;
        tokens = ids.n;
    }
    printf("%zu %.6f\n", tokens, best);
    st_token_list_free(&ids);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        st_die(ST_EXIT_USAGE, "usage: test_tokenizer encode|decode|time TOKENIZER FILE [N]");
    st_tokenizer *t;
    int rc = st_tokenizer_load(argv[2], &t);
    if (rc)
        return rc;
    size_t n;
    char *text = slurp(argv[3], &n);
    text = realloc(text, n + 1);
    text[n] = '\0';
    if (!strcmp(argv[1], "encode"))
        rc = encode_lines(t, text, n);
    else if (!strcmp(argv[1], "decode"))
        rc = decode_lines(t, text);
    else if (!strcmp(argv[1], "time"))
        rc = time_encode(t, text, n, argc > 4 ? atoi(argv[4]) : 3,
                         argc > 5 && !strcmp(argv[5], "lines"));
    else
        st_die(ST_EXIT_USAGE, "unknown mode %s", argv[1]);
    free(text);
    st_tokenizer_free(t);
    return rc;
}
