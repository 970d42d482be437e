/* Tick positions and labels (see axis.h). */
#include "report/axis.h"
#include "report/svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void st_axis_make(st_axis *a, double lo, double hi, int target)
{
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.05 : 1.0;
        lo -= pad;
        hi += pad;
    }
    if (target < 2)
        target = 2;
    double raw = (hi - lo) / target;
    double mag = pow(10.0, floor(log10(raw)));
    double norm = raw / mag;
    double step = (norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0) * mag;
    a->lo = lo;
    a->hi = hi;
    a->step = step;
    /* A tick that rounding puts a hair outside the range still counts. */
    double eps = step * 1e-9;
    a->k0 = (long long)ceil((lo - eps) / step);
    long long k1 = (long long)floor((hi + eps) / step);
    a->n = k1 >= a->k0 ? (int)(k1 - a->k0 + 1) : 0;
    a->maxabs = 0.0;
    for (int i = 0; i < a->n; i++)
        if (fabs(st_axis_tick(a, i)) > a->maxabs)
            a->maxabs = fabs(st_axis_tick(a, i));
}

double st_axis_tick(const st_axis *a, int i)
{
    return (double)(a->k0 + i) * a->step;
}

/* Digits after the point that spacing `step` needs in units of `unit`. */
static int decimals_for(double step, double unit)
{
    int d = (int)ceil(-log10(step / unit) - 1e-9);
    return d < 0 ? 0 : d;
}

/* 65.50 -> 65.5, 2.00 -> 2, where the digits do not line up anyway. */
static void strip_zeros(char *num)
{
    char *dot = strchr(num, '.');
    if (!dot)
        return;
    char *end = num + strlen(num) - 1;
    while (end > dot && *end == '0')
        *end-- = '\0';
    if (end == dot)
        *end = '\0';
}

static const struct {
    double scale;
    const char *suffix;
} si[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};

char *st_axis_label(const st_axis *a, int i, char *buf, size_t size)
{
    double v = st_axis_tick(a, i);
    char num[48];
    if (fabs(v) < a->step * 1e-6) {
        snprintf(buf, size, "0");
        return buf;
    }
    if (a->maxabs >= 1e4) {
        /* 10000 and up: "10k", "1.5M"; below that plain digits read better. */
        for (size_t k = 0; k < sizeof si / sizeof si[0]; k++)
            if (a->maxabs >= si[k].scale || k + 1 == sizeof si / sizeof si[0]) {
                st_svg_format_num(num, sizeof num, v / si[k].scale,
                                  decimals_for(a->step, si[k].scale));
                snprintf(buf, size, "%s%s", num, si[k].suffix);
                return buf;
            }
    }
    if (a->maxabs < 1e-2) {
        /* Each label its own power of ten: 5e-4, 1e-3, 1.5e-3. */
        int e = (int)floor(log10(fabs(v)) + 1e-9);
        double unit = pow(10.0, e);
        st_svg_format_num(num, sizeof num, v / unit, decimals_for(a->step, unit));
        strip_zeros(num);
        snprintf(buf, size, "%se%d", num, e);
        return buf;
    }
    st_svg_format_num(buf, size, v, decimals_for(a->step, 1.0));
    return buf;
}
