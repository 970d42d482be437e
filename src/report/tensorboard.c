/* TensorBoard event files (see tensorboard.h): the Event records are
 * packed by protobuf-c from tb_event.proto, framed as TFRecords with
 * masked CRC-32C (crc32c.c). */
#include "report/tensorboard.h"

#include "base/files.h"
#include "base/log.h"
#include "report/crc32c.h"
#include "report/tb_event.pb-c.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TB_FILE_PREFIX "events.out.tfevents."
/* Version 2 tells TensorBoard to purge orphaned steps on SessionLog START
 * (tensorboard.h), not on every step that goes backwards. */
#define TB_FILE_VERSION "brain.Event:2"

struct st_tb_writer {
    FILE *f;
    char *path;
    int failed;             /* a write failed and was reported: ignore the rest */
};

static double wall_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The TIME of the file name: now, or one past the newest event file
 * already in dir (tensorboard.h says why). */
static long long file_name_time(const char *dir)
{
    long long t = (long long)time(NULL);
    DIR *d = opendir(dir);
    if (!d)
        return t;
    const size_t np = strlen(TB_FILE_PREFIX);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, TB_FILE_PREFIX, np) != 0)
            continue;
        char *end;
        long long other = strtoll(e->d_name + np, &end, 10);
        if (end != e->d_name + np && *end == '.' && other >= t)
            t = other + 1;
    }
    closedir(d);
    return t;
}

static int fail(st_tb_writer *w, const char *what)
{
    if (!w->failed)
        st_error(w->path, "%s TensorBoard events: %s; no more are written to this file",
                 what, strerror(errno));
    w->failed = 1;
    return ST_EXIT_FAILURE;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One TFRecord holding ev, handed to the kernel before returning. */
static int write_event(st_tb_writer *w, const Tensorflow__Event *ev)
{
    if (w->failed)
        return ST_EXIT_FAILURE;
    size_t n = tensorflow__event__get_packed_size(ev);
    unsigned char head[12], tail[4];
    unsigned char *data = malloc(n ? n : 1);
    if (!data) {
        errno = ENOMEM;
        return fail(w, "cannot write");
    }
    tensorflow__event__pack(ev, data);
    put_le64(head, (uint64_t)n);
    put_le32(head + 8, st_crc32c_mask(st_crc32c(0, head, 8)));
    put_le32(tail, st_crc32c_mask(st_crc32c(0, data, n)));
    int ok = fwrite(head, 1, sizeof head, w->f) == sizeof head &&
             fwrite(data, 1, n, w->f) == n &&
             fwrite(tail, 1, sizeof tail, w->f) == sizeof tail && fflush(w->f) == 0;
    free(data);
    return ok ? 0 : fail(w, "cannot write");
}

static int write_summary(st_tb_writer *w, int64_t step, Tensorflow__Summary__Value **values,
                         size_t n)
{
    Tensorflow__Summary summary = TENSORFLOW__SUMMARY__INIT;
    summary.n_value = n;
    summary.value = values;
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.wall_time = wall_time_now();
    ev.step = step;
    ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
    ev.summary = &summary;
    return write_event(w, &ev);
}

int st_tb_open(st_tb_writer **out, const char *log_dir, int64_t resumed_from_step)
{
    *out = NULL;
    int rc = st_mkdir_p(log_dir);
    if (rc)
        return rc;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    st_tb_writer *w = calloc(1, sizeof *w);
    if (!w || asprintf(&w->path, "%s/" TB_FILE_PREFIX "%lld.%s.%ld", log_dir,
                       file_name_time(log_dir), host, (long)getpid()) < 0) {
        free(w);
        st_error(log_dir, "out of memory opening the TensorBoard event file");
        return ST_EXIT_FAILURE;
    }
    /* O_EXCL: never append to another writer's file */
    int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        st_error(w->path, "cannot create the TensorBoard event file: %s; check that "
                 "log.dir is writable", strerror(errno));
        if (fd >= 0)
            close(fd);
        free(w->path);
        free(w);
        return ST_EXIT_FAILURE;
    }
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.wall_time = wall_time_now();
    ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)TB_FILE_VERSION;
    rc = write_event(w, &ev);

    Tensorflow__SessionLog start = TENSORFLOW__SESSION_LOG__INIT;
    start.status = TENSORFLOW__SESSION_LOG__SESSION_STATUS__START;
    ev.step = resumed_from_step + 1;
    ev.what_case = TENSORFLOW__EVENT__WHAT_SESSION_LOG;
    ev.session_log = &start;
    if (!rc)
        rc = write_event(w, &ev);
    if (rc) {
        st_tb_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

const char *st_tb_path(const st_tb_writer *w)
{
    return w->path;
}

int st_tb_scalars(st_tb_writer *w, int64_t step, const st_tb_value *values, int n)
{
    Tensorflow__Summary__Value vals[16], *ptrs[16];
    if (n < 0 || n > 16)
        st_bug("st_tb_scalars: %d values in one record (at most 16)", n);
    for (int i = 0; i < n; i++) {
        tensorflow__summary__value__init(&vals[i]);
        vals[i].tag = (char *)values[i].tag;
        vals[i].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        vals[i].simple_value = (float)values[i].value;
        ptrs[i] = &vals[i];
    }
    return write_summary(w, step, ptrs, (size_t)n);
}

int st_tb_scalar(st_tb_writer *w, const char *tag, int64_t step, double value)
{
    st_tb_value v = {tag, value};
    return st_tb_scalars(w, step, &v, 1);
}

int st_tb_text(st_tb_writer *w, const char *tag, int64_t step, const char *text)
{
    /* What TensorBoard's own text summary writes: the plugin named in the
     * metadata, the text a scalar DT_STRING tensor. */
    Tensorflow__SummaryMetadata__PluginData plugin = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    plugin.plugin_name = (char *)"text";
    Tensorflow__SummaryMetadata meta = TENSORFLOW__SUMMARY_METADATA__INIT;
    meta.plugin_data = &plugin;
    ProtobufCBinaryData s = {strlen(text), (uint8_t *)text};
    Tensorflow__TensorProto tensor = TENSORFLOW__TENSOR_PROTO__INIT;
    tensor.dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
    tensor.n_string_val = 1;
    tensor.string_val = &s;
    Tensorflow__Summary__Value val = TENSORFLOW__SUMMARY__VALUE__INIT;
    val.tag = (char *)tag;
    val.metadata = &meta;
    val.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
    val.tensor = &tensor;
    Tensorflow__Summary__Value *ptr = &val;
    return write_summary(w, step, &ptr, 1);
}

int st_tb_text_block(st_tb_writer *w, const char *tag, int64_t step, const char *text)
{
    size_t lines = 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    char *block = malloc(strlen(text) + 4 * lines + 1), *q = block;
    if (!block) {
        errno = ENOMEM;
        return fail(w, "cannot write");
    }
    for (const char *p = text; *p; p++) {
        if ((p == text || p[-1] == '\n') && *p != '\n') {
            memcpy(q, "    ", 4);
            q += 4;
        }
        *q++ = *p;
    }
    *q = '\0';
    int rc = st_tb_text(w, tag, step, block);
    free(block);
    return rc;
}

int st_tb_close(st_tb_writer *w)
{
    if (!w)
        return 0;
    int rc = w->failed ? ST_EXIT_FAILURE : 0;
    if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0)
        rc = fail(w, "cannot finish");
    if (fclose(w->f) != 0 && !rc)
        rc = fail(w, "cannot finish");
    free(w->path);
    free(w);
    return rc;
}
