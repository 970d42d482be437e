/* Writing SVG text into memory: a growing buffer, numbers formatted
 * without the C library's locale (a decimal comma would break every
 * coordinate), and XML escaping for text that comes from the user (run
 * directory names).  The plot (plot.c) builds its whole picture here and
 * writes it to disk in one go. */
#ifndef ST_SVG_H
#define ST_SVG_H

#include <stddef.h>

typedef struct {
    char *text;   /* NUL-terminated */
    size_t len, cap;
    int failed;   /* an allocation failed; the text is incomplete */
} st_svg;

void st_svg_init(st_svg *s);
void st_svg_free(st_svg *s);

/* Append formatted text.  Only integer and string conversions: a %f or %g
 * would follow LC_NUMERIC; numbers with a fraction go through st_svg_num. */
void st_svg_printf(st_svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* x with `decimals` digits after the point (at most 9), '.' whatever the
 * locale, no exponent, "-0" printed as "0". */
void st_svg_num(st_svg *s, double x, int decimals);
/* The same into buf (at least 32 bytes); returns buf. */
char *st_svg_format_num(char *buf, size_t size, double x, int decimals);

/* Append ` name="x"`, x as st_svg_num writes it. */
void st_svg_attr(st_svg *s, const char *name, double x, int decimals);

/* Append text with &, <, >, " and ' escaped, and bytes below 0x20 dropped. */
void st_svg_escaped(st_svg *s, const char *text);

/* <text x= y= ATTRS>TEXT</text>; attrs is raw SVG attributes (may be ""). */
void st_svg_text(st_svg *s, double x, double y, const char *attrs, const char *text);

/* <line x1= y1= x2= y2= ATTRS/> */
void st_svg_line(st_svg *s, double x1, double y1, double x2, double y2, const char *attrs);

#endif
