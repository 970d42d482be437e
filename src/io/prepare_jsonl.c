/* The documents of a JSONL file for `shardtrain prepare --format jsonl`
 * (io/data.h): one JSON object per line with the document's text in a
 * string field "text", the form pretraining sets ship in.  Blank lines
 * are skipped; anything else that is not such an object is the user's to
 * fix, reported as FILE:LINE with exit status 2, before a single shard is
 * written.  Instruction data (prompt and completion fields) is a different
 * thing, with loss masks, and is refused here with a hint. */
#include "io/data.h"

#include "base/log.h"

#include <jansson.h>
#include <string.h>

int st_jsonl_documents(const char *path, const unsigned char *bytes, int64_t n,
                       st_document_fn fn, void *ctx)
{
    int line = 0, docs = 0;
    for (int64_t start = 0; start < n;) {
        const unsigned char *nl = memchr(bytes + start, '\n', (size_t)(n - start));
        int64_t end = nl ? (int64_t)(nl - bytes) : n;
        line++;
        int64_t a = start, b = end;
        while (a < b && (bytes[a] == ' ' || bytes[a] == '\t' || bytes[a] == '\r'))
            a++;
        start = end + 1;
        if (a == b)
            continue;
        json_error_t err;
        json_t *o = json_loadb((const char *)bytes + a, (size_t)(b - a),
                               JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
        json_t *text = json_object_get(o, "text");
        int rc = 0;
        if (!o) {
            char buf[128];
            st_error_at(path, line, "not valid JSON: %s; hint: JSONL is one JSON object per "
                        "line", st_printable(err.text, buf, sizeof buf));
            rc = ST_EXIT_USAGE;
        } else if (!json_is_object(o)) {
            st_error_at(path, line, "not a JSON object; hint: each line is "
                        "{\"text\": \"...\"}");
            rc = ST_EXIT_USAGE;
        } else if (!json_is_string(text)) {
            st_error_at(path, line, "%s; hint: each line is {\"text\": \"...\"}%s",
                        text ? "field \"text\" is not a string" : "no field \"text\"",
                        json_object_get(o, "prompt") || json_object_get(o, "messages")
                            ? " (instruction data with prompt/completion or messages is not "
                              "supported yet)" : "");
            rc = ST_EXIT_USAGE;
        } else {
            rc = fn(ctx, json_string_value(text), json_string_length(text));
            docs++;
        }
        json_decref(o);
        if (rc)
            return rc;
    }
    if (docs == 0) {
        st_error(path, "no documents: every line is blank; give one JSON object per line");
        return ST_EXIT_USAGE;
    }
    return 0;
}
