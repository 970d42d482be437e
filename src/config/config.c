/* Loading the run configuration: read the INI file through inih, expand
 * ${VAR}, apply `-s` overrides, resolve the preset and derived defaults and
 * validate, all against the schema table in schema.c.
 *
 * inih is lenient where a training run should not be: it truncates long
 * lines, folds indented lines into the previous value and accepts
 * duplicates.  So the stream reader given to inih looks at every raw line
 * first and stops the parse at the first thing we refuse, and every error
 * is recorded with its line and printed once, as the first problem found. */
#include "config/config.h"
#include "config/hf_shape.h"
#include "config/limits.h"
#include "config/expand.h"

#include "base/log.h"
#include "config/origin.h"
#include "config/schema.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>

/* ---- typed access to the struct through the schema offsets -------------- */

static void *field(const st_config *cfg, const st_key *k)
{
    return (char *)cfg + k->offset;
}

static struct st_config_origin *origin(const st_config *cfg, const char *sec, const char *key)
{
    return &cfg->origin[st_schema_index(sec, key)];
}

static bool is_explicit(const st_config *cfg, const char *sec, const char *key)
{
    return origin(cfg, sec, key)->src >= ST_FROM_FILE;
}

/* ---- value conversion ------------------------------------------------------ */

static bool in_range(const st_key *k, double v)
{
    unsigned f = k->flags;
    if ((f & ST_R_MIN) && (f & ST_R_MIN_OPEN ? v <= k->min : v < k->min))
        return false;
    if ((f & ST_R_MAX) && (f & ST_R_MAX_OPEN ? v >= k->max : v > k->max))
        return false;
    return true;
}

static int parse_bool(const char *s)
{
    static const char *const t[] = {"true", "yes", "on", "1"}, *const f[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, t[i]) == 0) return 1;
        if (strcasecmp(s, f[i]) == 0) return 0;
    }
    return -1;
}

/* Convert text (already expanded) for key k and store it.  Returns 0, or -1
 * with a message in err. */
static int store_value(st_config *cfg, const st_key *k, const char *text, char *err, size_t errn)
{
    char vals[256], range[64];
    void *dst = field(cfg, k);
    if (k->type != ST_T_STRING && !*text) {
        snprintf(err, errn, "empty value for %s.%s; hint: give a value or remove the line",
                 k->section, k->key);
        return -1;
    }
    switch (k->type) {
    case ST_T_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (end == text || *end) {
            snprintf(err, errn, "invalid integer '%.64s' for %s.%s", text, k->section, k->key);
            return -1;
        }
        if (errno == ERANGE || !in_range(k, (double)v)) {
            snprintf(err, errn, "%s.%s = %.64s is out of range; must be %s", k->section, k->key,
                     text, st_schema_range_text(k, range, sizeof range));
            return -1;
        }
        *(int64_t *)dst = v;
        return 0;
    }
    case ST_T_FLOAT: {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (end == text || *end || isnan(v)) {
            snprintf(err, errn, "invalid number '%.64s' for %s.%s", text, k->section, k->key);
            return -1;
        }
        if (errno == ERANGE || !isfinite(v) || !in_range(k, v)) {
            snprintf(err, errn, "%s.%s = %.64s is out of range; must be %s", k->section, k->key,
                     text, *st_schema_range_text(k, range, sizeof range) ? range : "finite");
            return -1;
        }
        *(double *)dst = v;
        return 0;
    }
    case ST_T_BOOL: {
        int b = parse_bool(text);
        if (b < 0) {
            snprintf(err, errn, "invalid boolean '%.64s' for %s.%s; allowed: %s", text,
                     k->section, k->key, st_schema_values_text(k, vals, sizeof vals));
            return -1;
        }
        *(int *)dst = b;
        return 0;
    }
    case ST_T_ENUM:
        for (int i = 0; k->values[i]; i++) {
            if (strcmp(text, k->values[i]) == 0) {
                *(int *)dst = i;
                return 0;
            }
        }
        snprintf(err, errn, "invalid value '%.64s' for %s.%s; allowed: %s", text, k->section,
                 k->key, st_schema_values_text(k, vals, sizeof vals));
        return -1;
    case ST_T_STRING:
        if (strcmp(k->section, "model") == 0 && strcmp(k->key, "preset") == 0 && *text &&
            !st_preset_find(text)) {
            snprintf(err, errn, "unknown preset '%.64s' for model.preset; allowed: %s", text,
                     st_schema_values_text(k, vals, sizeof vals));
            return -1;
        }
        char *copy = strdup(text);
        if (!copy) {
            snprintf(err, errn, "out of memory");
            return -1;
        }
        free(*(char **)dst);
        *(char **)dst = copy;
        return 0;
    }
    return -1;
}

/* Expand, convert, store and record where the value came from. */
static int set_key(st_config *cfg, int idx, const char *raw, int src, int line,
                   char *err, size_t errn)
{
    char sub[768];
    char *text = st_config_expand_env(raw, sub, sizeof sub);
    if (!text) {
        snprintf(err, errn, "%s.%s: %s", st_schema[idx].section, st_schema[idx].key, sub);
        return -1;
    }
    int rc = store_value(cfg, &st_schema[idx], text, err, errn);
    free(text);
    if (rc == 0) {
        cfg->origin[idx].src = src;
        cfg->origin[idx].line = line;
    }
    return rc;
}

/* Appends "; did you mean 'x'?" for the closest candidate, or nothing. */
static void suggest(char *buf, size_t n, const char *word, const char *section)
{
    const char *best = NULL;
    int bestd = 4;
    if (section) {
        for (int i = 0; i < st_schema_n; i++) {
            if (strcmp(st_schema[i].section, section) != 0)
                continue;
            int d = st_levenshtein(word, st_schema[i].key);
            if (d < bestd && d < (int)strlen(word)) { bestd = d; best = st_schema[i].key; }
        }
    } else {
        for (int i = 0; st_sections[i]; i++) {
            int d = st_levenshtein(word, st_sections[i]);
            if (d < bestd && d < (int)strlen(word)) { bestd = d; best = st_sections[i]; }
        }
    }
    size_t len = strlen(buf);
    if (best)
        snprintf(buf + len, n - len, "; did you mean '%s'?", best);
    else if (!section)
        snprintf(buf + len, n - len, "; hint: sections are [model] [data] [train] [optim] "
                 "[parallel] [checkpoint] [log]");
    else
        snprintf(buf + len, n - len, "; hint: `shardtrain keys` lists the keys");
}

static bool known_section(const char *s)
{
    for (int i = 0; st_sections[i]; i++)
        if (strcmp(st_sections[i], s) == 0)
            return true;
    return false;
}

/* ---- reading the file ------------------------------------------------------ */

typedef struct {
    st_config *cfg;
    FILE *fp;
    const char *file;
    int lineno;              /* lines handed to inih so far */
    int err_line;            /* 0 = no error recorded */
    char err[1024];
    char *buf;
    size_t cap;
} loader;

static void fail(loader *ld, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(loader *ld, int line, const char *fmt, ...)
{
    if (ld->err_line)
        return;                  /* the first problem is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ld->err, sizeof ld->err, fmt, ap);
    va_end(ap);
    ld->err_line = line;
}

/* inih's find_chars_or_comment: the first of chars, or an inline ';'
 * comment (one preceded by whitespace), or the end. */
static const char *find_or_comment(const char *s, const char *chars)
{
    bool was_space = false;
    while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* Refuse what inih would silently misread, and find its syntax errors
 * ourselves so that they come with a useful message.  Returns false after
 * recording an error. */
static bool check_raw_line(loader *ld, const char *line, size_t len)
{
    int n = ld->lineno;
    if (strlen(line) != len) {
        fail(ld, n, "NUL byte in line; hint: the file must be text");
        return false;
    }
    if (n == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0)
        line += 3;               /* inih skips a UTF-8 byte-order mark */
    const char *s = line;
    while (*s && isspace((unsigned char)*s))
        s++;
    if (!*s || *s == ';' || *s == '#')
        return true;
    if (s > line) {
        fail(ld, n, "indented line; continuation lines are not supported; "
             "hint: put the value on one line");
        return false;
    }
    if (*s == '[') {
        const char *end = find_or_comment(s + 1, "]");
        if (*end != ']') {
            fail(ld, n, "section header without closing ']'; hint: write [section]");
            return false;
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(end - s - 1), s + 1);
        /* A name past the buffer is no known section; said as such. */
        if ((size_t)(end - s - 1) >= sizeof name || !known_section(name)) {
            char msg[512];
            snprintf(msg, sizeof msg, "unknown section [%s]", name);
            suggest(msg, sizeof msg, name, NULL);
            fail(ld, n, "%s", msg);
            return false;
        }
        return true;
    }
    const char *eq = find_or_comment(s, "=:");
    if (*eq != '=' && *eq != ':') {
        fail(ld, n, "line has no '='; hint: write key = value");
        return false;
    }
    /* inih keeps 49 bytes of a name and drops the rest: refused here, so
     * that no cut name is looked up or shown. */
    const char *kend = eq;
    while (kend > s && isspace((unsigned char)kend[-1]))
        kend--;
    if (kend - s > 49) {
        fail(ld, n, "key name '%.40s...' is %d bytes long; no key is longer than 49; "
             "hint: `shardtrain keys` lists the keys", s, (int)(kend - s));
        return false;
    }
    return true;
}

/* inih's reader: whole lines from the FILE, so that long and indented
 * lines are caught before inih truncates or folds them. */
static char *reader(char *str, int num, void *stream)
{
    loader *ld = stream;
    if (ld->err_line)
        return NULL;
    /* At most num - 1 bytes are read per line, so a file without newlines
     * (/dev/zero, say) is refused at its first line rather than read into
     * memory; byte by byte, so that a NUL byte is still seen. */
    size_t len = 0, max = (size_t)num - 1;
    int c = EOF;
    while (len < max && (c = getc(ld->fp)) != EOF) {
        str[len++] = (char)c;
        if (c == '\n')
            break;
    }
    if (len == 0)
        return NULL;
    ld->lineno++;
    if (len == max && str[len - 1] != '\n') {
        int next = getc(ld->fp);
        if (next != EOF) {
            fail(ld, ld->lineno, "line longer than %d bytes; hint: shorten the value, "
                 "for example with ${VAR}", num - 1);
            return NULL;
        }
    }
    str[len] = '\0';
    if (!check_raw_line(ld, str, len))
        return NULL;
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    loader *ld = user;
    int line = ld->lineno;
    char msg[1024];
    if (!name)
        return 1;                /* new-section callback, when inih is built with it */
    if (!*section) {
        fail(ld, line, "key '%s' outside any section; hint: put it under a [section] header", name);
        return 0;
    }
    if (!known_section(section)) {
        snprintf(msg, sizeof msg, "unknown section [%s]", section);
        suggest(msg, sizeof msg, section, NULL);
        fail(ld, line, "%s", msg);
        return 0;
    }
    int idx = st_schema_index(section, name);
    if (idx < 0) {
        snprintf(msg, sizeof msg, "unknown key '%s' in [%s]", name, section);
        suggest(msg, sizeof msg, name, section);
        fail(ld, line, "%s", msg);
        return 0;
    }
    if (ld->cfg->origin[idx].src == ST_FROM_FILE) {
        fail(ld, line, "duplicate key '%s' in [%s]; first set on line %d; hint: keep one",
             name, section, ld->cfg->origin[idx].line);
        return 0;
    }
    if (set_key(ld->cfg, idx, value, ST_FROM_FILE, line, msg, sizeof msg) < 0) {
        fail(ld, line, "%s", msg);
        return 0;
    }
    return 1;
}

static int read_file(st_config *cfg, const char *path)
{
    loader ld = {.cfg = cfg, .file = path};
    /* Without blocking, and only what can be read to its end: a FIFO, a
     * socket or a directory named as the configuration is an error, not a
     * hang (character devices such as /dev/null pass: the line bound above
     * stops /dev/zero). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 &&
        (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode) || S_ISDIR(sb.st_mode))) {
        close(fd);
        st_error_at(path, 0, "not a regular file (%s); hint: give the configuration file "
                    "itself", S_ISDIR(sb.st_mode) ? "a directory" : "a pipe or socket");
        return ST_EXIT_USAGE;
    }
    ld.fp = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!ld.fp) {
        st_error_at(path, 0, "cannot open: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return ST_EXIT_USAGE;
    }
    int rc = ini_parse_stream(reader, &ld, handler, &ld);
    bool ioerr = ferror(ld.fp);
    fclose(ld.fp);
    free(ld.buf);
    if (rc > 0 && (!ld.err_line || rc < ld.err_line)) {
        st_error_at(path, rc, "syntax error; hint: write [section] or key = value");
        return ST_EXIT_USAGE;
    }
    if (ld.err_line) {
        st_error_at(path, ld.err_line, "%s", ld.err);
        return ST_EXIT_USAGE;
    }
    if (rc < 0 || ioerr) {
        st_error_at(path, 0, rc == -2 ? "out of memory" : "read error");
        return ST_EXIT_USAGE;
    }
    return 0;
}

/* ---- overrides, presets, derived defaults and cross-key checks ------------ */

static int apply_override(st_config *cfg, const st_override *ov)
{
    const char *t = ov->text, *eq = strchr(t, '='), *dot = strchr(t, '.');
    if (!eq || !dot || dot > eq || dot == t || dot + 1 == eq) {
        st_error_at("command line", ov->argno, "invalid override '%.64s'; "
                    "hint: write -s section.key=value", t);
        return ST_EXIT_USAGE;
    }
    char sec[64], key[64], msg[1024];
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - t), t);
    snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
    for (size_t n = strlen(key); n && isspace((unsigned char)key[n - 1]);)
        key[--n] = '\0';
    if (!known_section(sec)) {
        snprintf(msg, sizeof msg, "unknown section [%s] in override '%.64s'", sec, t);
        suggest(msg, sizeof msg, sec, NULL);
        st_error_at("command line", ov->argno, "%s", msg);
        return ST_EXIT_USAGE;
    }
    int idx = st_schema_index(sec, key);
    if (idx < 0) {
        snprintf(msg, sizeof msg, "unknown key '%s' in [%s]", key, sec);
        suggest(msg, sizeof msg, key, sec);
        st_error_at("command line", ov->argno, "%s", msg);
        return ST_EXIT_USAGE;
    }
    /* Trim like inih trims file values, so `-s 'train.steps = 7'` works. */
    const char *v = eq + 1;
    while (isspace((unsigned char)*v))
        v++;
    char *val = strdup(v);
    if (!val)
        return ST_EXIT_FAILURE;
    for (size_t n = strlen(val); n && isspace((unsigned char)val[n - 1]);)
        val[--n] = '\0';
    int rc = set_key(cfg, idx, val, ST_FROM_CMDLINE, ov->argno, msg, sizeof msg);
    free(val);
    if (rc < 0) {
        st_error_at("command line", ov->argno, "%s", msg);
        return ST_EXIT_USAGE;
    }
    return 0;
}

/* Set a key that the file and command line left alone. */
static void set_implicit_int(st_config *cfg, const char *key, int64_t v, int src)
{
    int idx = st_schema_index("model", key);
    if (cfg->origin[idx].src >= ST_FROM_FILE)
        return;
    *(int64_t *)field(cfg, &st_schema[idx]) = v;
    cfg->origin[idx].src = src;
    cfg->origin[idx].line = 0;
}

static void set_implicit_double(st_config *cfg, const char *key, double v, int src)
{
    int idx = st_schema_index("model", key);
    if (cfg->origin[idx].src >= ST_FROM_FILE)
        return;
    *(double *)field(cfg, &st_schema[idx]) = v;
    cfg->origin[idx].src = src;
    cfg->origin[idx].line = 0;
}

/* model.init's config.json, over the preset: it describes the weights.
 * Only the fields it has; what it lacks keeps the preset's or the derived
 * default. */
static int apply_hf_shape(st_config *cfg)
{
    st_model_config *m = &cfg->model;
    st_hf_shape h;
    int got = st_hf_shape_read(m->init, &h, &cfg->hf_config);
    if (got < 0) {
        st_error(NULL, "out of memory");
        return ST_EXIT_FAILURE;
    }
    if (got == 0)
        return 0;
    int ai = st_schema_index("model", "arch");
    if (h.arch >= 0 && cfg->origin[ai].src < ST_FROM_FILE) {
        m->arch = h.arch;
        cfg->origin[ai].src = ST_FROM_HF;
    }
    const struct { const char *key; int64_t v; } ints[] = {
        {"n_layer", h.n_layer}, {"n_head", h.n_head}, {"n_kv_head", h.n_kv_head},
        {"d_model", h.d_model}, {"d_ff", h.d_ff}, {"vocab_size", h.vocab_size},
        {"seq_len", h.seq_len}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v > 0)
            set_implicit_int(cfg, ints[i].key, ints[i].v, ST_FROM_HF);
    if (h.rope_theta > 0)
        set_implicit_double(cfg, "rope_theta", h.rope_theta, ST_FROM_HF);
    if (h.norm_eps > 0)
        set_implicit_double(cfg, "norm_eps", h.norm_eps, ST_FROM_HF);
    int ti = st_schema_index("model", "tie_embeddings");
    if (h.tie_embeddings >= 0 && cfg->origin[ti].src < ST_FROM_FILE) {
        m->tie_embeddings = h.tie_embeddings;
        cfg->origin[ti].src = ST_FROM_HF;
    }
    int ri = st_schema_index("model", "rope_scaling");
    if (h.rope_llama3 && cfg->origin[ri].src < ST_FROM_FILE) {
        m->rope_scaling = ST_ROPE_LLAMA3;
        cfg->origin[ri].src = ST_FROM_HF;
        if (h.rope_factor > 0)
            set_implicit_double(cfg, "rope_factor", h.rope_factor, ST_FROM_HF);
        if (h.rope_low_freq_factor > 0)
            set_implicit_double(cfg, "rope_low_freq_factor", h.rope_low_freq_factor, ST_FROM_HF);
        if (h.rope_high_freq_factor > 0)
            set_implicit_double(cfg, "rope_high_freq_factor", h.rope_high_freq_factor,
                                ST_FROM_HF);
        if (h.rope_original_seq_len > 0)
            set_implicit_int(cfg, "rope_original_seq_len", h.rope_original_seq_len, ST_FROM_HF);
    }
    return 0;
}

static int resolve(st_config *cfg)
{
    char err[512];
    st_model_config *m = &cfg->model;

    /* Static defaults for everything not set explicitly. */
    for (int i = 0; i < st_schema_n; i++) {
        const st_key *k = &st_schema[i];
        if (cfg->origin[i].src >= ST_FROM_FILE || !k->def)
            continue;
        if (store_value(cfg, k, k->def, err, sizeof err) < 0) {
            st_error_at("schema", 0, "bad default: %s", err);   /* a bug in schema.c */
            return ST_EXIT_FAILURE;
        }
        cfg->origin[i].src = ST_FROM_DEFAULT;
        cfg->origin[i].line = 0;
    }

    const st_preset *p = *m->preset ? st_preset_find(m->preset) : NULL;
    if (p) {
        int ai = st_schema_index("model", "arch");
        if (p->arch >= 0 && cfg->origin[ai].src < ST_FROM_FILE) {
            m->arch = p->arch;
            cfg->origin[ai].src = ST_FROM_PRESET;
        }
        set_implicit_int(cfg, "n_layer", p->n_layer, ST_FROM_PRESET);
        set_implicit_int(cfg, "n_head", p->n_head, ST_FROM_PRESET);
        set_implicit_int(cfg, "n_kv_head", p->n_kv_head[m->arch] ? p->n_kv_head[m->arch] : m->n_head,
                         ST_FROM_PRESET);
        set_implicit_int(cfg, "d_model", p->d_model, ST_FROM_PRESET);
        set_implicit_int(cfg, "d_ff", p->d_ff[m->arch], ST_FROM_PRESET);
        set_implicit_int(cfg, "vocab_size", p->vocab_size, ST_FROM_PRESET);
        set_implicit_int(cfg, "seq_len", p->seq_len, ST_FROM_PRESET);
        if (p->rope_theta > 0)
            set_implicit_double(cfg, "rope_theta", p->rope_theta, ST_FROM_PRESET);
        if (p->norm_eps > 0)
            set_implicit_double(cfg, "norm_eps", p->norm_eps, ST_FROM_PRESET);
        int ti = st_schema_index("model", "tie_embeddings");
        if (p->tie_embeddings >= 0 && cfg->origin[ti].src < ST_FROM_FILE) {
            m->tie_embeddings = p->tie_embeddings;
            cfg->origin[ti].src = ST_FROM_PRESET;
        }
    }

    int rc = apply_hf_shape(cfg);
    if (rc)
        return rc;

    /* Derived defaults, for what neither the preset, config.json nor the
     * user set. */
    if (origin(cfg, "model", "n_kv_head")->src == ST_FROM_DEFAULT)
        m->n_kv_head = m->n_head;
    if (origin(cfg, "model", "d_ff")->src == ST_FROM_DEFAULT)
        m->d_ff = m->arch == ST_ARCH_GPT2 ? 4 * m->d_model : ((8 * m->d_model + 2) / 3 + 15) / 16 * 16;
    if (origin(cfg, "model", "tie_embeddings")->src == ST_FROM_DEFAULT)
        m->tie_embeddings = m->arch == ST_ARCH_GPT2;
    if (origin(cfg, "train", "global_batch")->src == ST_FROM_DEFAULT)
        cfg->train.global_batch = cfg->train.micro_batch;
    return 0;
}

/* Cross-key errors point at `primary` when the user set it, else at
 * `other` when the user set that, so the line shown is one to edit. */
static int cross_key_error(const st_config *cfg, const char *sec, const char *primary,
                           const char *other, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int cross_key_error(const st_config *cfg, const char *sec, const char *primary,
                           const char *other, const char *fmt, ...)
{
    const char *key = primary;
    if (!is_explicit(cfg, sec, primary) && is_explicit(cfg, sec, other))
        key = other;
    va_list ap;
    va_start(ap, fmt);
    int rc = st_config_verror(cfg, sec, key, fmt, ap);
    va_end(ap);
    return rc;
}

static int validate(const st_config *cfg)
{
    const st_model_config *m = &cfg->model;
    if (m->d_model % m->n_head)
        return cross_key_error(cfg, "model", "n_head", "d_model",
                               "model.d_model = %lld is not divisible by model.n_head = %lld; "
                               "hint: pick n_head dividing d_model",
                               (long long)m->d_model, (long long)m->n_head);
    if (m->n_head % m->n_kv_head)
        return cross_key_error(cfg, "model", "n_kv_head", "n_head",
                               "model.n_head = %lld is not divisible by model.n_kv_head = %lld; "
                               "hint: pick n_kv_head dividing n_head",
                               (long long)m->n_head, (long long)m->n_kv_head);
    if (m->arch == ST_ARCH_GPT2 && m->n_kv_head != m->n_head)
        return cross_key_error(cfg, "model", "n_kv_head", "arch",
                               "arch gpt2 needs model.n_kv_head = model.n_head (got %lld and "
                               "%lld); hint: remove n_kv_head or use arch = llama for "
                               "grouped-query attention",
                               (long long)m->n_kv_head, (long long)m->n_head);
    if (m->arch == ST_ARCH_LLAMA && (m->d_model / m->n_head) % 2)
        return cross_key_error(cfg, "model", "n_head", "d_model",
                               "head dimension d_model/n_head = %lld is odd; "
                               "hint: RoPE (arch llama) needs an even head dimension",
                               (long long)(m->d_model / m->n_head));
    if (m->rope_scaling == ST_ROPE_LLAMA3 && m->arch != ST_ARCH_LLAMA)
        return cross_key_error(cfg, "model", "rope_scaling", "arch",
                               "model.rope_scaling = llama3 needs arch llama (GPT-2 has no "
                               "RoPE); hint: remove rope_scaling");
    if (m->rope_scaling == ST_ROPE_LLAMA3 && m->rope_high_freq_factor <= m->rope_low_freq_factor)
        return cross_key_error(cfg, "model", "rope_high_freq_factor", "rope_low_freq_factor",
                               "model.rope_high_freq_factor = %g is not above "
                               "model.rope_low_freq_factor = %g; hint: llama3 scaling "
                               "interpolates between them (Llama 3.1: 4 and 1)",
                               m->rope_high_freq_factor, m->rope_low_freq_factor);
    if (cfg->train.global_batch % cfg->train.micro_batch)
        return cross_key_error(cfg, "train", "global_batch", "micro_batch",
                               "train.global_batch = %lld is not a multiple of "
                               "train.micro_batch = %lld; hint: make it a multiple",
                               (long long)cfg->train.global_batch,
                               (long long)cfg->train.micro_batch);
    if (cfg->optim.min_lr > cfg->optim.lr)
        return cross_key_error(cfg, "optim", "min_lr", "lr",
                               "optim.min_lr = %g is above optim.lr = %g; hint: min_lr <= lr",
                               cfg->optim.min_lr, cfg->optim.lr);
    return st_config_check_sizes(cfg);
}

/* ---- public API -------------------------------------------------------------- */

static int init(st_config *cfg, const char *path)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->origin = calloc((size_t)st_schema_n, sizeof *cfg->origin);
    cfg->path = path ? strdup(path) : NULL;
    if (!cfg->origin || (path && !cfg->path)) {
        st_error(NULL, "out of memory");
        return ST_EXIT_FAILURE;
    }
    return 0;
}

int st_config_load(st_config *cfg, const char *path, const st_override *overrides, int n_overrides)
{
    int rc = init(cfg, path);
    if (rc)
        return rc;
    if ((rc = read_file(cfg, path)))
        return rc;
    for (int i = 0; i < n_overrides; i++)
        if ((rc = apply_override(cfg, &overrides[i])))
            return rc;
    if ((rc = resolve(cfg)))
        return rc;
    return validate(cfg);
}

int st_config_defaults(st_config *cfg)
{
    int rc = init(cfg, NULL);
    if (!rc)
        rc = resolve(cfg);
    return rc ? rc : validate(cfg);
}

void st_config_free(st_config *cfg)
{
    if (!cfg)
        return;
    for (int i = 0; i < st_schema_n; i++)
        if (st_schema[i].type == ST_T_STRING) {
            char **s = field(cfg, &st_schema[i]);
            free(*s);
            *s = NULL;
        }
    free(cfg->path);
    free(cfg->hf_config);
    free(cfg->origin);
    cfg->path = NULL;
    cfg->hf_config = NULL;
    cfg->origin = NULL;
}

const char *st_enum_name(const char *section, const char *key, int value)
{
    int idx = st_schema_index(section, key);
    if (idx < 0)
        return "?";
    const st_key *k = &st_schema[idx];
    if (k->type == ST_T_BOOL)
        return value ? "true" : "false";
    if (k->type != ST_T_ENUM || value < 0)
        return "?";
    for (int i = 0; k->values[i]; i++)
        if (i == value)
            return k->values[i];
    return "?";
}
