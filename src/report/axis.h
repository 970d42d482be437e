/* Axis ticks a person reads at a glance: 1, 2 or 5 times a power of ten
 * apart, labelled with as few digits as the spacing needs, SI suffixes for
 * large numbers (10k, 1.2M) and a power of ten for small ones (3e-4, the
 * way learning rates are written).  Labels go through svg.h's number
 * formatting, so they do not depend on the locale. */
#ifndef ST_AXIS_H
#define ST_AXIS_H

#include <stddef.h>

typedef struct {
    double lo, hi;   /* the axis range (hi > lo) */
    double step;     /* between ticks */
    long long k0;    /* first tick = k0 x step, the first multiple >= lo */
    int n;           /* ticks within [lo, hi] */
    double maxabs;   /* largest |tick|, which picks the labels' form */
} st_axis;

/* About `target` ticks over [lo, hi]; a range of zero width is widened
 * around its value first. */
void st_axis_make(st_axis *a, double lo, double hi, int target);

/* Tick i's value. */
double st_axis_tick(const st_axis *a, int i);

/* Tick i's label into buf (32 bytes are enough). */
char *st_axis_label(const st_axis *a, int i, char *buf, size_t size);

#endif
