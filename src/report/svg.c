/* SVG text in memory (see svg.h). */
#include "report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_svg_init(st_svg *s)
{
    memset(s, 0, sizeof *s);
}

void st_svg_free(st_svg *s)
{
    free(s->text);
    memset(s, 0, sizeof *s);
}

/* Room for n more bytes and the NUL. */
static int reserve(st_svg *s, size_t n)
{
    if (s->failed)
        return -1;
    if (s->len + n + 1 <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + n + 1)
        cap *= 2;
    char *t = realloc(s->text, cap);
    if (!t) {
        s->failed = 1;
        return -1;
    }
    s->text = t;
    s->cap = cap;
    return 0;
}

static void append(st_svg *s, const char *p, size_t n)
{
    if (reserve(s, n))
        return;
    memcpy(s->text + s->len, p, n);
    s->len += n;
    s->text[s->len] = '\0';
}

void st_svg_printf(st_svg *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(s, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(s->text + s->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->len += (size_t)n;
}

char *st_svg_format_num(char *buf, size_t size, double x, int decimals)
{
    if (decimals < 0)
        decimals = 0;
    if (decimals > 9)
        decimals = 9;
    if (!isfinite(x) || fabs(x) >= 9e15) {
        /* Never a coordinate of a plot; a placeholder that still parses. */
        snprintf(buf, size, "0");
        return buf;
    }
    int64_t scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    /* Whole units and the fraction as integers, so no conversion of a
     * floating-point number ever meets the locale. */
    double r = round(fabs(x) * (double)scale);
    int negative = x < 0 && r > 0;
    int64_t whole = (int64_t)(r / (double)scale);
    int64_t frac = (int64_t)(r - (double)whole * (double)scale);
    if (decimals == 0)
        snprintf(buf, size, "%s%lld", negative ? "-" : "", (long long)whole);
    else
        snprintf(buf, size, "%s%lld.%0*lld", negative ? "-" : "", (long long)whole, decimals,
                 (long long)frac);
    return buf;
}

void st_svg_num(st_svg *s, double x, int decimals)
{
    char buf[48];
    st_svg_format_num(buf, sizeof buf, x, decimals);
    append(s, buf, strlen(buf));
}

void st_svg_escaped(st_svg *s, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&': append(s, "&amp;", 5); break;
        case '<': append(s, "&lt;", 4); break;
        case '>': append(s, "&gt;", 4); break;
        case '"': append(s, "&quot;", 6); break;
        case '\'': append(s, "&apos;", 6); break;
        default:
            /* XML 1.0 has no way to write most control characters. */
            if ((unsigned char)*p >= 0x20)
                append(s, p, 1);
        }
    }
}

void st_svg_attr(st_svg *s, const char *name, double x, int decimals)
{
    st_svg_printf(s, " %s=\"", name);
    st_svg_num(s, x, decimals);
    st_svg_printf(s, "\"");
}

void st_svg_text(st_svg *s, double x, double y, const char *attrs, const char *text)
{
    st_svg_printf(s, "<text");
    st_svg_attr(s, "x", x, 1);
    st_svg_attr(s, "y", y, 1);
    st_svg_printf(s, "%s%s>", *attrs ? " " : "", attrs);
    st_svg_escaped(s, text);
    st_svg_printf(s, "</text>\n");
}

void st_svg_line(st_svg *s, double x1, double y1, double x2, double y2, const char *attrs)
{
    st_svg_printf(s, "<line");
    st_svg_attr(s, "x1", x1, 1);
    st_svg_attr(s, "y1", y1, 1);
    st_svg_attr(s, "x2", x2, 1);
    st_svg_attr(s, "y2", y2, 1);
    st_svg_printf(s, "%s%s/>\n", *attrs ? " " : "", attrs);
}
