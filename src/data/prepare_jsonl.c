/* The lines of a JSONL file for `shardtrain prepare --format jsonl`
 * (data/data.h), one JSON object per line, in the three forms data sets
 * ship in:
 *   {"text": "..."}                          a document, every token trained;
 *   {"prompt": "...", "completion": "..."}   instruction data: only the
 *                                            completion is trained;
 *   {"messages": [{"role": "user", "content": "..."}, ...]}
 *                                            a conversation: only the
 *                                            assistant's messages are trained.
 * Each line becomes segments of text, each marked as counting in the loss
 * or not, and whether an end-of-text mark (the tokenizer's EOS, or a
 * newline at byte level) follows it.  The template of a conversation is
 * deliberately simple and documented in shardtrain(1): each message is
 * "ROLE: " (never trained) then its content and the end mark (trained for
 * the assistant).  Blank lines are skipped; anything else that is not one
 * of these forms is the user's to fix, reported as FILE:LINE with exit
 * status 2, before a single shard is written. */
#include "data/data.h"

#include "base/log.h"

#include <jansson.h>
#include <string.h>

enum { MAX_SEGMENTS = 4096 };

static const char FORMS[] = "{\"text\": ...}, {\"prompt\": ..., \"completion\": ...} or "
                            "{\"messages\": [{\"role\": ..., \"content\": ...}, ...]}";

static const char *const ROLE_HEADERS[][2] = {
    {"system", "system: "}, {"user", "user: "}, {"assistant", "assistant: "}};

/* A conversation's segments: header, content, for each message. */
static int messages_segments(const char *path, int line, const json_t *msgs,
                             st_segment *segs, int *n)
{
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        st_error_at(path, line, "\"messages\" is %s; hint: a list of {\"role\": ..., "
                    "\"content\": ...} objects", json_is_array(msgs) ? "empty" : "not a list");
        return ST_EXIT_USAGE;
    }
    if (json_array_size(msgs) > MAX_SEGMENTS / 2) {
        st_error_at(path, line, "%zu messages, more than %d in one example",
                    json_array_size(msgs), MAX_SEGMENTS / 2);
        return ST_EXIT_USAGE;
    }
    int trained = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        const json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        int r = -1;
        for (int k = 0; k < 3 && json_is_string(role); k++)
            if (!strcmp(json_string_value(role), ROLE_HEADERS[k][0]))
                r = k;
        if (!json_is_object(m) || r < 0 || !json_is_string(content)) {
            char what[96], name[48];
            if (!json_is_object(m))
                snprintf(what, sizeof what, "is not an object");
            else if (!json_is_string(role))
                snprintf(what, sizeof what, "has no string \"role\"");
            else if (r < 0)
                snprintf(what, sizeof what, "has role '%s'",
                         st_printable(json_string_value(role), name, sizeof name));
            else
                snprintf(what, sizeof what, "has no string \"content\"");
            st_error_at(path, line, "message %zu %s; hint: each message is {\"role\": "
                        "\"system\"|\"user\"|\"assistant\", \"content\": \"...\"}", i + 1,
                        what);
            return ST_EXIT_USAGE;
        }
        const int assistant = r == 2;
        /* As with an empty completion: an assistant message with nothing in
         * it trains only its end mark, the model learning to answer with
         * silence.  One such turn among good ones is still a hole in the
         * data, so it is refused too, named by its place in the list. */
        if (assistant && json_string_length(content) == 0) {
            st_error_at(path, line, "message %zu (assistant) has an empty \"content\", so "
                        "it would train on nothing but the end of text; hint: give its "
                        "answer, or drop the line", i + 1);
            return ST_EXIT_USAGE;
        }
        trained |= assistant;
        segs[(*n)++] = (st_segment){ROLE_HEADERS[r][1], strlen(ROLE_HEADERS[r][1]), 0, 0};
        segs[(*n)++] = (st_segment){json_string_value(content), json_string_length(content),
                                    assistant, 1};
    }
    if (!trained) {
        st_error_at(path, line, "no message has role \"assistant\", so nothing would be "
                    "trained; hint: give the answer as an assistant message");
        return ST_EXIT_USAGE;
    }
    return 0;
}

/* The segments of one parsed line; *instruction: whether it was a prompt/
 * completion or messages line. */
static int line_segments(const char *path, int line, const json_t *o, st_segment *segs,
                         int *n, int *instruction)
{
    const json_t *text = json_object_get(o, "text"), *prompt = json_object_get(o, "prompt");
    const json_t *completion = json_object_get(o, "completion");
    const json_t *msgs = json_object_get(o, "messages");
    const int forms = !!text + !!(prompt || completion) + !!msgs;
    *n = 0;
    *instruction = 0;
    if (forms != 1) {
        st_error_at(path, line, "%s; hint: each line is one of %s",
                    forms ? "more than one of \"text\", \"prompt\"/\"completion\" and "
                            "\"messages\""
                          : "no field \"text\", \"prompt\" or \"messages\"", FORMS);
        return ST_EXIT_USAGE;
    }
    if (text) {
        if (!json_is_string(text)) {
            st_error_at(path, line, "field \"text\" is not a string; hint: each line is one "
                        "of %s", FORMS);
            return ST_EXIT_USAGE;
        }
        segs[(*n)++] = (st_segment){json_string_value(text), json_string_length(text), 1, 1};
        return 0;
    }
    *instruction = 1;
    if (msgs)
        return messages_segments(path, line, msgs, segs, n);
    if (!json_is_string(prompt) || !json_is_string(completion)) {
        const char *which = !json_is_string(prompt) ? "prompt" : "completion";
        st_error_at(path, line, "field \"%s\" is %s; hint: instruction lines are {\"prompt\": "
                    "\"...\", \"completion\": \"...\"}", which,
                    json_object_get(o, which) ? "not a string" : "missing");
        return ST_EXIT_USAGE;
    }
    /* An empty completion teaches only to stop right after the prompt: a
     * missing answer in the data, as a rule.  An empty prompt is fine. */
    if (json_string_length(completion) == 0) {
        st_error_at(path, line, "field \"completion\" is empty, so the example would train "
                    "on nothing but the end of text; hint: give its answer, or drop the line");
        return ST_EXIT_USAGE;
    }
    segs[(*n)++] = (st_segment){json_string_value(prompt), json_string_length(prompt), 0, 0};
    segs[(*n)++] = (st_segment){json_string_value(completion), json_string_length(completion),
                                1, 1};
    return 0;
}

int st_jsonl_examples(const char *path, const unsigned char *bytes, int64_t n,
                      st_example_fn fn, void *ctx, int *any_instruction)
{
    static st_segment segs[MAX_SEGMENTS];
    int line = 0, examples = 0;
    *any_instruction = 0;
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
        int rc = 0, nseg = 0, instruction = 0;
        if (!o) {
            char buf[128];
            st_error_at(path, line, "not valid JSON: %s; hint: JSONL is one JSON object per "
                        "line", st_printable(err.text, buf, sizeof buf));
            rc = ST_EXIT_USAGE;
        } else if (!json_is_object(o)) {
            st_error_at(path, line, "not a JSON object; hint: each line is one of %s", FORMS);
            rc = ST_EXIT_USAGE;
        } else {
            rc = line_segments(path, line, o, segs, &nseg, &instruction);
        }
        if (!rc) {
            *any_instruction |= instruction;
            rc = fn(ctx, segs, nseg);
            examples++;
        }
        json_decref(o);
        if (rc)
            return rc;
    }
    if (examples == 0) {
        st_error(path, "no documents: every line is blank; give one JSON object per line");
        return ST_EXIT_USAGE;
    }
    return 0;
}
