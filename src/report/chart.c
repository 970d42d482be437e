/* Chart frames and their marks (see chart.h). */
#include "report/chart.h"

#include <stdio.h>

double st_chart_px(const st_chart_frame *f, double x)
{
    return f->left + (x - f->x.lo) / (f->x.hi - f->x.lo) * f->width;
}

double st_chart_py(const st_chart_frame *f, double y)
{
    return f->top + f->height - (y - f->y.lo) / (f->y.hi - f->y.lo) * f->height;
}

void st_chart_polyline(st_svg *s, const st_chart_frame *f, const st_chart_points *p,
                       const char *id, const char *colour, const char *style)
{
    st_svg_printf(s, "<polyline id=\"%s\" fill=\"none\" stroke=\"%s\" %s points=\"", id, colour,
                  style);
    for (int64_t i = 0; i < p->n; i++) {
        if (i)
            st_svg_printf(s, " ");
        st_svg_num(s, st_chart_px(f, p->x[i]), 2);
        st_svg_printf(s, ",");
        st_svg_num(s, st_chart_py(f, p->y[i]), 2);
    }
    st_svg_printf(s, "\"/>\n");
}

/* " X Y" of a path's point. */
static void path_point(st_svg *s, const char *command, double x, double y)
{
    st_svg_printf(s, "%s", command);
    st_svg_num(s, x, 1);
    st_svg_printf(s, " ");
    st_svg_num(s, y, 1);
}

void st_chart_cross(st_svg *s, double x, double y, double r, const char *colour)
{
    st_svg_printf(s, "<path stroke=\"%s\" stroke-width=\"2\" d=\"", colour);
    path_point(s, "M", x - r, y - r);
    path_point(s, "L", x + r, y + r);
    path_point(s, "M", x - r, y + r);
    path_point(s, "L", x + r, y - r);
    st_svg_printf(s, "\"/>\n");
}

void st_chart_circle(st_svg *s, double x, double y, double r, const char *colour)
{
    st_svg_printf(s, "<circle");
    st_svg_attr(s, "cx", x, 2);
    st_svg_attr(s, "cy", y, 2);
    st_svg_attr(s, "r", r, 1);
    st_svg_printf(s, " fill=\"#fff\" stroke=\"%s\" stroke-width=\"1.8\"/>\n", colour);
}

/* Text rotated to read upwards, centred on (x, y). */
static void text_up(st_svg *s, double x, double y, const char *text)
{
    char attrs[160];
    char xs[32], ys[32];
    snprintf(attrs, sizeof attrs,
             "text-anchor=\"middle\" font-size=\"13\" fill=\"#222\" "
             "transform=\"rotate(-90 %s %s)\"",
             st_svg_format_num(xs, sizeof xs, x, 1), st_svg_format_num(ys, sizeof ys, y, 1));
    st_svg_text(s, x, y, attrs, text);
}

void st_chart_draw_frame(st_svg *s, const st_chart_frame *f, const char *y_title,
                         const char *x_title)
{
    char label[48];
    st_svg_printf(s, "<rect");
    st_svg_attr(s, "x", f->left, 1);
    st_svg_attr(s, "y", f->top, 1);
    st_svg_attr(s, "width", f->width, 1);
    st_svg_attr(s, "height", f->height, 1);
    st_svg_printf(s, " fill=\"#fff\" stroke=\"#999\"/>\n");
    for (int i = 0; i < f->y.n; i++) {
        double y = st_chart_py(f, st_axis_tick(&f->y, i));
        st_svg_line(s, f->left, y, f->left + f->width, y, "stroke=\"#e4e4e4\"");
        st_svg_line(s, f->left - 4, y, f->left, y, "stroke=\"#999\"");
        st_svg_text(s, f->left - 7, y + 4, "text-anchor=\"end\" font-size=\"11\" fill=\"#444\"",
                    st_axis_label(&f->y, i, label, sizeof label));
    }
    const double bottom = f->top + f->height;
    for (int i = 0; i < f->x.n; i++) {
        double x = st_chart_px(f, st_axis_tick(&f->x, i));
        st_svg_line(s, x, f->top, x, bottom, "stroke=\"#e4e4e4\"");
        st_svg_line(s, x, bottom, x, bottom + 4, "stroke=\"#999\"");
        st_svg_text(s, x, bottom + 16, "text-anchor=\"middle\" font-size=\"11\" fill=\"#444\"",
                    st_axis_label(&f->x, i, label, sizeof label));
    }
    text_up(s, f->left - 56, f->top + f->height / 2, y_title);
    if (x_title)
        st_svg_text(s, f->left + f->width / 2, bottom + 34,
                    "text-anchor=\"middle\" font-size=\"13\" fill=\"#222\"", x_title);
}

void st_chart_top_axis(st_svg *s, const st_chart_frame *f, double per_x, const char *title)
{
    st_axis t;
    st_axis_make(&t, f->x.lo * per_x, f->x.hi * per_x, 8);
    char label[48];
    for (int i = 0; i < t.n; i++) {
        double x = st_chart_px(f, st_axis_tick(&t, i) / per_x);
        st_svg_line(s, x, f->top - 4, x, f->top, "stroke=\"#999\"");
        st_svg_text(s, x, f->top - 8, "text-anchor=\"middle\" font-size=\"11\" fill=\"#444\"",
                    st_axis_label(&t, i, label, sizeof label));
    }
    st_svg_text(s, f->left + f->width / 2, f->top - 26,
                "text-anchor=\"middle\" font-size=\"13\" fill=\"#222\"", title);
}
