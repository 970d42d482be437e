/* A chart frame on an SVG page: a rectangle with an x axis below it and a
 * y axis left of it (grid, round ticks from axis.h, titles with units),
 * optionally a second x scale above it, and the marks placed in its data
 * coordinates - polylines, circles, crosses.  The plot (plot.c) stacks
 * frames down a page and decides what goes in each. */
#ifndef ST_CHART_H
#define ST_CHART_H

#include <stdint.h>

#include "report/axis.h"
#include "report/svg.h"

typedef struct {
    double left, top, width, height; /* page pixels */
    st_axis x, y;                    /* the data ranges shown */
} st_chart_frame;

typedef struct {
    double *x, *y; /* data coordinates */
    int64_t n;
} st_chart_points;

/* Data coordinates to page pixels (y grows downwards on the page). */
double st_chart_px(const st_chart_frame *f, double x);
double st_chart_py(const st_chart_frame *f, double y);

/* The frame, its grid, the ticks and their labels, the y axis title
 * (rotated) and the x axis title below (NULL for none). */
void st_chart_draw_frame(st_svg *s, const st_chart_frame *f, const char *y_title,
                         const char *x_title);

/* A second scale along the top, in units of `per_x` per unit of x (tokens
 * per step), with its title above. */
void st_chart_top_axis(st_svg *s, const st_chart_frame *f, double per_x, const char *title);

/* The points as one <polyline id=ID> of the colour; style is more SVG
 * attributes (stroke width, opacity). */
void st_chart_polyline(st_svg *s, const st_chart_frame *f, const st_chart_points *p,
                       const char *id, const char *colour, const char *style);

/* Marks at page pixels: a hollow circle of radius r, a cross r across each
 * arm (one <path>). */
void st_chart_circle(st_svg *s, double x, double y, double r, const char *colour);
void st_chart_cross(st_svg *s, double x, double y, double r, const char *colour);

#endif
