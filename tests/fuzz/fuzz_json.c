/*
 * fuzz_json.c - the events' JSON writer (events/json.c) and checker (json_valid.c). The
 * input is a script of writer calls: an op byte, then what it takes (strings as a length
 * byte and that many bytes, any bytes at all; numbers as 8 raw bytes, so NaN, infinities and
 * denormals come too). Every document written must be valid JSON by dt_json_valid, a string
 * written alone must decode back to its bytes (unless some were not UTF-8 and became
 * U+FFFD), and the raw input goes through dt_json_valid too: the spool checks records torn
 * by a crash with it, so it reads what a disk hands back.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "events/json.h"
#include "fuzz.h"

struct in {
    const uint8_t *p, *end;
};

static uint8_t byte(struct in *in) { return in->p < in->end ? *in->p++ : 0; }

/* a length byte and that many bytes, as a C string (malloc'd) */
static char *text(struct in *in)
{
    size_t n = byte(in);
    if (n > (size_t)(in->end - in->p)) n = (size_t)(in->end - in->p);
    char *s = dt_fuzz_str(in->p, n);
    in->p += n;
    return s;
}

static uint64_t bits(struct in *in)
{
    uint64_t v = 0;
    size_t n = (size_t)(in->end - in->p) < 8 ? (size_t)(in->end - in->p) : 8;
    memcpy(&v, in->p, n);
    in->p += n;
    return v;
}

/* too_deep: an object was opened past the writer's DT_JSON_DEPTH - 1 levels, which fails the document */
static void check_doc(struct dt_json *j, bool too_deep)
{
    const char *doc = dt_json_end(j);
    if (too_deep) {
        if (doc) dt_fuzz_fail("objects nested past DT_JSON_DEPTH - 1 gave a document: %s", doc);
        return;
    }
    if (!doc) dt_fuzz_fail("dt_json_end: out of memory");
    if (!dt_json_valid(doc, strlen(doc))) dt_fuzz_fail("the writer wrote invalid JSON: %s", doc);
}

static void put_utf8(char *out, size_t *o, unsigned cp)
{
    if (cp < 0x80) out[(*o)++] = (char)cp;
    else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | cp >> 6);
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xe0 | cp >> 12);
        out[(*o)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* s written as a JSON string alone: valid, and decoding to s where nothing was replaced */
static void quoted_alone(const char *s)
{
    struct dt_json j = {0};
    dt_json_quoted(&j, s);
    if (j.oom) dt_fuzz_fail("dt_json_quoted: out of memory");
    if (!dt_json_valid(j.buf, j.len)) dt_fuzz_fail("dt_json_quoted wrote invalid JSON: %s", j.buf);
    if (!strstr(j.buf, "\\ufffd")) {
        char *dec = malloc(j.len + 1);
        size_t o = 0;
        if (!dec) dt_fuzz_fail("out of memory");
        for (size_t i = 1; i + 1 < j.len; i++) {
            char c = j.buf[i];
            if (c != '\\') {
                dec[o++] = c;
                continue;
            }
            c = j.buf[++i];
            if (c == 'u') {
                put_utf8(dec, &o, (unsigned)strtoul((char[5]){j.buf[i + 1], j.buf[i + 2], j.buf[i + 3], j.buf[i + 4], 0},
                                                    NULL, 16));
                i += 4;
            } else {
                dec[o++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
            }
        }
        dec[o] = '\0';
        if (strcmp(dec, s)) dt_fuzz_fail("dt_json_quoted(\"%s\") is %s, which decodes to \"%s\"", s, j.buf, dec);
        free(dec);
    }
    dt_json_free(&j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_fuzz_init();
    dt_json_valid((const char *)data, size);
    struct in in = {data, data + size};
    struct dt_json j = {0};
    bool too_deep = false;
    dt_json_begin(&j);
    while (in.p < in.end) {
        uint8_t op = byte(&in) % 10;
        if (op == 6 && j.depth + 1 >= DT_JSON_DEPTH) too_deep = true;
        if (op == 7 && j.depth == 0) op = 5;                 /* closing the root is dt_json_end's */
        char *k = op <= 6 || op == 9 ? text(&in) : NULL, *v;
        union {
            uint64_t u;
            double d;
            int64_t i;
        } num;
        switch (op) {
        case 0:
            v = text(&in);
            dt_json_str(&j, k, v);
            free(v);
            break;
        case 1: dt_json_str(&j, k, NULL); break;
        case 2:
            num.u = bits(&in);
            dt_json_num(&j, k, num.d);
            break;
        case 3:
            num.u = bits(&in);
            dt_json_int(&j, k, num.i);
            break;
        case 4: dt_json_bool(&j, k, byte(&in) & 1); break;
        case 5: dt_json_null(&j, k ? k : ""); break;
        case 6: dt_json_obj(&j, k); break;
        case 7: dt_json_close(&j); break;
        case 8: /* the next document in the same buffer */
            check_doc(&j, too_deep);
            too_deep = false;
            dt_json_begin(&j);
            break;
        case 9: quoted_alone(k); break;
        }
        free(k);
    }
    check_doc(&j, too_deep);
    dt_json_free(&j);
    return 0;
}
