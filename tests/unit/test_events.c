/*
 * test_events.c - the event layer's pieces: every JSON string escape, invalid
 * UTF-8 replaced so the output stays valid, nesting and non-finite numbers;
 * the spool's order across appends, prepends, partial reads and a reopen; the
 * URL shown in logs without credentials; HMAC-SHA256 against RFC 4231; the
 * webhook's memory bound while both the spool and the endpoint fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dt_build_config.h"
#include "core/fault.h"
#include "dt_test.h"
#include "events/json.h"
#include "events/spool.h"
#include "events/webhook.h"

static char *quoted(const char *s)
{
    struct dt_json j = {0};
    dt_json_quoted(&j, s);
    char *r = strdup(j.buf);
    dt_json_free(&j);
    return r;
}

#define QUOTED(in, want)                                                                                          \
    do {                                                                                                          \
        char *got = quoted(in);                                                                                   \
        assert_string_equal(got, want);                                                                           \
        free(got);                                                                                                \
    } while (0)

static void escapes(void **state)
{
    (void)state;
    QUOTED("plain", "\"plain\"");
    QUOTED("a\"b", "\"a\\\"b\"");
    QUOTED("a\\b", "\"a\\\\b\"");
    QUOTED("\n\t\r\b\f", "\"\\n\\t\\r\\b\\f\"");
    QUOTED("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
    QUOTED("/", "\"/\""); /* allowed unescaped */
    /* UTF-8 of 2, 3 and 4 bytes passes through */
    QUOTED("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    /* not UTF-8: a lone continuation byte, a truncated sequence, an overlong '/', a surrogate, past U+10FFFF */
    QUOTED("a\x80z", "\"a\\ufffdz\"");
    QUOTED("\xe2\x82", "\"\\ufffd\\ufffd\"");
    QUOTED("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    QUOTED("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    QUOTED("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

static void documents(void **state)
{
    (void)state;
    struct dt_json j = {0};
    dt_json_begin(&j);
    dt_json_str(&j, "s", "x");
    dt_json_null(&j, "n");
    dt_json_obj(&j, "o");
    dt_json_int(&j, "i", -3);
    dt_json_num(&j, "nan", NAN);
    dt_json_num(&j, "inf", INFINITY);
    dt_json_obj(&j, "deeper");
    dt_json_bool(&j, "t", true);
    dt_json_close(&j);
    dt_json_num(&j, "f", 0.1);
    dt_json_close(&j);
    dt_json_str(&j, "null string", NULL);
    assert_string_equal(dt_json_end(&j), "{\"s\":\"x\",\"n\":null,\"o\":{\"i\":-3,\"nan\":null,\"inf\":null,"
                                         "\"deeper\":{\"t\":true},\"f\":0.1},\"null string\":null}");
    dt_json_begin(&j); /* reused, and objects left open are closed by end */
    dt_json_obj(&j, "a");
    dt_json_int(&j, "b", 1);
    assert_string_equal(dt_json_end(&j), "{\"a\":{\"b\":1}}");
    dt_json_begin(&j); /* DT_JSON_DEPTH - 1 levels nest; one more fails the document (its commas were wrong) */
    for (int d = 1; d < DT_JSON_DEPTH; d++) {
        dt_json_int(&j, "x", d);
        dt_json_obj(&j, "o");
    }
    dt_json_int(&j, "y", 1);
    assert_string_equal(dt_json_end(&j), "{\"x\":1,\"o\":{\"x\":2,\"o\":{\"x\":3,\"o\":{\"x\":4,\"o\":{\"x\":5,"
                                         "\"o\":{\"x\":6,\"o\":{\"x\":7,\"o\":{\"y\":1}}}}}}}}");
    dt_json_begin(&j);
    for (int d = 0; d < DT_JSON_DEPTH; d++) dt_json_obj(&j, "o");
    assert_null(dt_json_end(&j));
    dt_json_begin(&j); /* and the writer is whole again for the next */
    dt_json_int(&j, "z", 0);
    assert_string_equal(dt_json_end(&j), "{\"z\":0}");
    dt_json_free(&j);
}

/* the spool's check of its records: what the writer makes is valid; what a torn write or junk
 * leaves is not */
static void validity(void **state)
{
    (void)state;
    static const char *const good[] = {"{}", "[]", " {\"a\":[1,-2.5e+3,true,false,null,\"\\u00e9\\n\"]} ",
                                       "\"caf\xc3\xa9\"", "0", "-0.0e0", "[[[]]]", "{\"\xf0\x9f\x98\x80\":{}}"};
    static const char *const bad[] = {"", "{", "{\"a\":1", "{\"a\":1}x", "{\"a\" 1}", "{a:1}", "[1,]", "[01]",
                                      "\"\x01\"", "\"\\x\"", "\"\\u12\"", "\"\xe9\"", "\"\xc0\xaf\"",
                                      "\"\xed\xa0\x80\"", "tru", "1.", "-", "{} {}", "nul"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        if (!dt_json_valid(good[i], strlen(good[i]))) fail_msg("valid JSON refused: %s", good[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (dt_json_valid(bad[i], strlen(bad[i]))) fail_msg("invalid JSON accepted: %s", bad[i]);
    }
    /* a document the writer made, with every kind of awkward byte in a string */
    struct dt_json j = {0};
    dt_json_begin(&j);
    dt_json_str(&j, "s", "q\"b\\n\n\x01\xff\xc3\xa9\xed\xa0\x80");
    dt_json_num(&j, "x", -1.5e-300);
    const char *doc = dt_json_end(&j);
    assert_true(dt_json_valid(doc, strlen(doc)));
    assert_false(dt_json_valid(doc, strlen(doc) - 1)); /* torn by one byte */
    dt_json_free(&j);
    /* nesting past 64 levels is refused, not recursed into without end */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    assert_false(dt_json_valid(deep, 200));
}

/* the lines from the spool's offset, joined by '|' */
static void pending(struct dt_spool *s, char *out, size_t n)
{
    char **v, *buf;
    int64_t bytes;
    int k = dt_spool_read(s, 1000, &v, &buf, &bytes);
    out[0] = '\0';
    for (int i = 0; i < k; i++) snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? "|" : "", v[i]);
    free(v);
    free(buf);
}

static void spool(void **state)
{
    (void)state;
    struct dt_spool s;
    char got[256];
    assert_int_equal(dt_spool_open(&s, "t.spool"), DT_SUCCESS);
    assert_false(dt_spool_pending(&s));
    assert_int_equal(dt_spool_append(&s, "{\"id\":3}"), DT_SUCCESS);
    assert_int_equal(dt_spool_append(&s, "{\"id\":4}"), DT_SUCCESS);
    char *older[] = {"{\"id\":1}", "{\"id\":2}"};
    assert_int_equal(dt_spool_prepend(&s, older, 2), DT_SUCCESS);
    pending(&s, got, sizeof got);
    assert_string_equal(got, "{\"id\":1}|{\"id\":2}|{\"id\":3}|{\"id\":4}");
    /* two delivered; a reopened spool (a later run) starts at the third */
    char **v, *buf;
    int64_t bytes;
    assert_int_equal(dt_spool_read(&s, 2, &v, &buf, &bytes), 2);
    assert_int_equal(bytes, 18);
    free(v);
    free(buf);
    assert_int_equal(dt_spool_consume(&s, bytes), DT_SUCCESS);
    dt_spool_close(&s);
    assert_int_equal(dt_spool_open(&s, "t.spool"), DT_SUCCESS);
    assert_int_equal(dt_spool_count(&s), 2);
    pending(&s, got, sizeof got);
    assert_string_equal(got, "{\"id\":3}|{\"id\":4}");
    /* prepending keeps what is pending after the new lines, and forgets what was delivered */
    char *again[] = {"{\"id\":2}"};
    assert_int_equal(dt_spool_prepend(&s, again, 1), DT_SUCCESS);
    pending(&s, got, sizeof got);
    assert_string_equal(got, "{\"id\":2}|{\"id\":3}|{\"id\":4}");
    assert_int_equal(dt_spool_read(&s, 5, &v, &buf, &bytes), 3);
    free(v);
    free(buf);
    assert_int_equal(dt_spool_consume(&s, bytes), DT_SUCCESS);
    assert_false(dt_spool_pending(&s));
    assert_int_equal(s.size, 0); /* emptied: truncated, offset file gone */
    assert_int_equal(access("t.spool.offset", F_OK), -1);
    dt_spool_close(&s);
}

static void redact(void **state)
{
    (void)state;
    char b[256];
    dt_webhook_redact("https://alice:s3cret@hooks.example.com:8443/T0/B1/XYZ?token=abc", b, sizeof b);
    assert_string_equal(b, "https://hooks.example.com:8443");
    dt_webhook_redact("http://127.0.0.1/hook", b, sizeof b);
    assert_string_equal(b, "http://127.0.0.1");
}

static void hmac_sha256(void **state)
{
    (void)state;
    char sig[72];
#ifdef HAVE_CRYPTO
    /* the signed message is timestamp "." body; the expected MACs come from Python's hmac module:
     * hmac.new(b"Jefe", b"what do ya want for nothing.?", hashlib.sha256), and the same for "1700000000.{}" */
    assert_int_equal(dt_webhook_sign("Jefe", "what do ya want for nothing", "?", 1, sig), DT_SUCCESS);
    assert_string_equal(sig, "sha256=155919e0daf8bec124e0c77ab84649a9c91a9649077c7265f11c47b37dee5783");
    assert_int_equal(dt_webhook_sign("Jefe", "1700000000", "{}", 2, sig), DT_SUCCESS);
    assert_string_equal(sig, "sha256=d3793e2b4103edfbd98cc19591832f5fad701d413db9fcae0ae7dab8184ed207");
#else
    assert_int_equal(dt_webhook_sign("Jefe", "1", "{}", 2, sig), DT_ERR_CONFIG);
#endif
}

/* The spool's disk full (DTRUN_FAULT=spool_enospc) while the endpoint refuses connections: the event in
 * the memory queue stays there, the next DT_WEBHOOK_HELD_MAX wait in memory, the ones after are dropped
 * with one warning naming the first one's step, and close counts every event it could not keep. */
static void held_bound(void **state)
{
    (void)state;
    setenv("DTRUN_FAULT", "spool_enospc@1:0", 1);
    assert_int_equal(dt_fault_init(), DT_SUCCESS);
    dt_fault_at(1, 0);
    struct dt_webhook_cfg c = {.url = "http://127.0.0.1:1/", .batch = 1, .queue = 1, .connect_timeout = 1,
                               .timeout = 1, .backoff = 3600, .max_backoff = 3600, .spool = "hook.spool"};
    struct dt_webhook *w;
    assert_int_equal(dt_webhook_open(&c, &w), DT_SUCCESS);
    const int dropped = 5, n = 1 + DT_WEBHOOK_HELD_MAX + dropped;
    dt_test_stderr_begin();
    for (int i = 0; i < n; i++) dt_webhook_post(w, "{\"type\":\"metrics\"}", 1 + i);
    struct dt_webhook_stats st;
    dt_webhook_close(w, 0, &st);
    char *err = dt_test_stderr_end();
    unsetenv("DTRUN_FAULT");
    assert_int_equal(dt_fault_init(), DT_SUCCESS);
    assert_int_equal(st.delivered, 0);
    assert_int_equal(st.spooled, 0);
    assert_int_equal(st.left, 0);
    assert_int_equal(st.lost, n);
    char want[256];
    snprintf(want, sizeof want, "%d events wait in memory (the spool cannot be written, the endpoint does not answer): "
             "from the event of step %d on, events are dropped", DT_WEBHOOK_HELD_MAX, 2 + DT_WEBHOOK_HELD_MAX);
    const char *at = strstr(err, want);
    if (!at) fail_msg("no warning '%s' in:\n%.2000s", want, err);
    assert_null(strstr(at + strlen(want), "events are dropped"));
    assert_non_null(strstr(err, "the event of step 2 cannot be spooled: "));
    snprintf(want, sizeof want, "%d events were neither delivered nor taken by hook.spool", DT_WEBHOOK_HELD_MAX);
    if (!strstr(err, want)) fail_msg("no warning '%s' in:\n%.2000s", want, err);
    free(err);
}

DT_TESTS(T(escapes), T(documents), T(validity), T(spool), T(redact), T(hmac_sha256), T(held_bound))
