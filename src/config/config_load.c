/* Loading the run configuration: read the INI file through inih, expand
 * ${VAR}, apply `-s` overrides and give every key still unset its schema
 * default, converting each value's text against the schema table in
 * schema.c (its type and its own range); then resolve.c fills in the
 * preset, model.init's config.json and the derived defaults and checks the
 * keys against each other.
 *
 * inih is lenient where a training run should not be: it truncates long
 * lines, folds indented lines into the previous value and accepts
 * duplicates.  So the stream reader given to inih looks at every raw line
 * first and stops the parse at the first thing we refuse, and every error
 * is recorded with its line and printed once, as the first problem found. */
#include "config/config.h"
#include "config/expand.h"
#include "config/origin.h"
#include "config/resolve.h"

#include "base/log.h"
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

/* ---- value conversion ------------------------------------------------------ */

static const char *quote(const char *s, char buf[ST_QUOTE_BUF])
{
    return st_config_quote(s, strlen(s), buf);
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
    char vals[256], range[64], q[ST_QUOTE_BUF];
    void *dst = st_schema_field(cfg, k);
    if (k->type != ST_T_STRING && !*text) {
        st_format(err, errn, "empty value for %s.%s; hint: give a value or remove the line",
                  k->section, k->key);
        return -1;
    }
    switch (k->type) {
    case ST_T_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (end == text || *end) {
            st_format(err, errn, "invalid integer '%s' for %s.%s", quote(text, q), k->section,
                      k->key);
            return -1;
        }
        if (errno == ERANGE || !st_schema_int_in_range(k, v)) {
            st_format(err, errn, "%s.%s = %s is out of range; must be %s", k->section, k->key,
                      quote(text, q), st_schema_range_text(k, range, sizeof range));
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
            st_format(err, errn, "invalid number '%s' for %s.%s", quote(text, q), k->section,
                      k->key);
            return -1;
        }
        if (errno == ERANGE || !isfinite(v) || !st_schema_in_range(k, v)) {
            st_format(err, errn, "%s.%s = %s is out of range; must be %s", k->section, k->key,
                      quote(text, q),
                      *st_schema_range_text(k, range, sizeof range) ? range : "finite");
            return -1;
        }
        *(double *)dst = v;
        return 0;
    }
    case ST_T_BOOL: {
        int b = parse_bool(text);
        if (b < 0) {
            st_format(err, errn, "invalid boolean '%s' for %s.%s; allowed: %s", quote(text, q),
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
        st_format(err, errn, "invalid value '%s' for %s.%s; allowed: %s", quote(text, q),
                  k->section, k->key, st_schema_values_text(k, vals, sizeof vals));
        return -1;
    case ST_T_STRING:
        if (strcmp(k->section, "model") == 0 && strcmp(k->key, "preset") == 0 && *text &&
            !st_preset_find(text)) {
            st_format(err, errn, "unknown preset '%s' for model.preset; allowed: %s",
                      quote(text, q), st_schema_values_text(k, vals, sizeof vals));
            return -1;
        }
        char *copy = strdup(text);
        if (!copy) {
            st_format(err, errn, "out of memory");
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
        st_format(err, errn, "%s.%s: %s", st_schema[idx].section, st_schema[idx].key, sub);
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
    if (best)
        st_format_append(buf, n, "; did you mean '%s'?", best);
    else if (!section)
        st_format_append(buf, n, "; hint: sections are [model] [data] [train] [optim] "
                         "[parallel] [checkpoint] [log] [lora]");
    else
        st_format_append(buf, n, "; hint: `shardtrain keys` lists the keys");
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
    st_vformat(ld->err, sizeof ld->err, fmt, ap);
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
    /* inih splits lines at '\n' only: in a file with old Mac line endings
     * a '\r' would join lines into one, and their settings would be lost
     * or read into a value.  A CRLF ending is fine (inih strips it). */
    const char *cr = strchr(line, '\r');
    while (cr && (cr[1] == '\n' || !cr[1]))
        cr = strchr(cr + 1, '\r');
    if (cr) {
        fail(ld, n, "carriage return without a line feed; "
             "hint: convert the file to Unix line endings");
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
        /* inih ignores whatever follows the ']', so `[train] steps = 3`
         * would drop the setting.  Only white space and a ';' comment
         * (preceded by white space, as on any line) may follow. */
        const char *after = end + 1;
        while (isspace((unsigned char)*after))
            after++;
        if (*after && !(*after == ';' && after > end + 1)) {
            fail(ld, n, "text after ']' in section header; hint: put each setting on "
                 "its own line below the header (a comment there starts with ' ;')");
            return false;
        }
        char name[128], q[ST_QUOTE_BUF];
        size_t name_n = (size_t)(end - s - 1);
        snprintf(name, sizeof name, "%.*s", (int)name_n, s + 1);
        /* A name past the buffer is no known section; said as such. */
        if (name_n >= sizeof name || !known_section(name)) {
            char msg[512];
            st_format(msg, sizeof msg, "unknown section [%s]", st_config_quote(s + 1, name_n, q));
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
        st_format(msg, sizeof msg, "unknown section [%s]", section);
        suggest(msg, sizeof msg, section, NULL);
        fail(ld, line, "%s", msg);
        return 0;
    }
    int idx = st_schema_index(section, name);
    if (idx < 0) {
        st_format(msg, sizeof msg, "unknown key '%s' in [%s]", name, section);
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

/* ---- overrides ------------------------------------------------------------- */

static int apply_override(st_config *cfg, const st_override *ov)
{
    const char *t = ov->text, *eq = strchr(t, '='), *dot = strchr(t, '.');
    char q[ST_QUOTE_BUF], q2[ST_QUOTE_BUF];
    if (!eq || !dot || dot > eq || dot == t || dot + 1 == eq) {
        st_error_at("command line", ov->argno, "invalid override '%s'; "
                    "hint: write -s section.key=value", quote(t, q));
        return ST_EXIT_USAGE;
    }
    /* Names longer than the buffers are no known names (sections and keys
     * are shorter), and are quoted from the argument itself, marked if cut. */
    char sec[64], key[64], msg[1024];
    size_t sec_n = (size_t)(dot - t), key_n = (size_t)(eq - dot - 1);
    while (key_n && isspace((unsigned char)dot[key_n]))
        key_n--;
    snprintf(sec, sizeof sec, "%.*s", (int)sec_n, t);
    snprintf(key, sizeof key, "%.*s", (int)key_n, dot + 1);
    if (sec_n >= sizeof sec || !known_section(sec)) {
        st_format(msg, sizeof msg, "unknown section [%s] in override '%s'",
                  st_config_quote(t, sec_n, q2), quote(t, q));
        suggest(msg, sizeof msg, sec, NULL);
        st_error_at("command line", ov->argno, "%s", msg);
        return ST_EXIT_USAGE;
    }
    int idx = key_n < sizeof key ? st_schema_index(sec, key) : -1;
    if (idx < 0) {
        st_format(msg, sizeof msg, "unknown key '%s' in [%s]", st_config_quote(dot + 1, key_n, q),
                  sec);
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

/* ---- defaults -------------------------------------------------------------- */

/* The schema's static default for every key the file and command line left
 * alone; resolve.c then puts the preset's, config.json's and the derived
 * values over these. */
static int apply_defaults(st_config *cfg)
{
    char err[512];
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
    return 0;
}

/* ---- public API ------------------------------------------------------------ */

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
    if ((rc = apply_defaults(cfg)) || (rc = st_config_resolve(cfg)))
        return rc;
    return st_config_validate(cfg);
}

int st_config_defaults(st_config *cfg)
{
    int rc = init(cfg, NULL);
    if (!rc)
        rc = apply_defaults(cfg);
    if (!rc)
        rc = st_config_resolve(cfg);
    return rc ? rc : st_config_validate(cfg);
}

void st_config_free(st_config *cfg)
{
    if (!cfg)
        return;
    for (int i = 0; i < st_schema_n; i++)
        if (st_schema[i].type == ST_T_STRING) {
            char **s = st_schema_field(cfg, &st_schema[i]);
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
