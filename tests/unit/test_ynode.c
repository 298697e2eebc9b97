/* test_ynode.c - the located YAML/JSON composer (the CLI tests pin the bad-file classes). */
#include <string.h>
#include "config/ynode.h"
#include "core/error.h"
#include "dt_test.h"

static struct dt_ydoc *parse_ok(const char *text)
{
    struct dt_ydoc *doc = NULL;
    assert_int_equal(dt_ydoc_parse("t.yaml", text, strlen(text), &doc), DT_SUCCESS);
    return doc;
}

static void parse_fails(const char *text, const char *msg)
{
    struct dt_ydoc *doc = NULL;
    assert_int_equal(dt_ydoc_parse("t.yaml", text, strlen(text), &doc), DT_ERR_CONFIG);
    assert_null(doc);
    assert_string_equal(dt_error_msg(), msg);
}

static void locations(void **state)
{
    struct dt_ydoc *doc = parse_ok("run:\n  name: x\n  seed:   7\n");
    const struct dt_ynode *root = dt_ydoc_root(doc);
    assert_int_equal(root->kind, DT_Y_MAP);
    const struct dt_ynode *run = root->pairs[0].value;
    assert_string_equal(run->pairs[1].key->str, "seed");
    assert_int_equal(run->pairs[1].value->loc.line, 3);
    assert_int_equal(run->pairs[1].value->loc.col, 11);
    dt_ydoc_free(doc);
}

static void scalars(void **state)
{
    struct dt_ydoc *doc = parse_ok("a: ~\nb:\nc: null\nd: \"null\"\ne: !!str 32\nf: 'x'\n");
    const struct dt_ynode *r = dt_ydoc_root(doc);
    assert_true(dt_ynode_is_null(r->pairs[0].value));
    assert_true(dt_ynode_is_null(r->pairs[1].value));
    assert_true(dt_ynode_is_null(r->pairs[2].value));
    assert_false(dt_ynode_is_null(r->pairs[3].value));
    assert_true(r->pairs[4].value->quoted);
    assert_true(r->pairs[5].value->quoted);
    dt_ydoc_free(doc);
}

static void aliases_share(void **state)
{
    struct dt_ydoc *doc = parse_ok("base: &b {lr: 1}\nother: *b\n");
    const struct dt_ynode *r = dt_ydoc_root(doc);
    assert_ptr_equal(r->pairs[0].value, r->pairs[1].value);
    dt_ydoc_free(doc);
    parse_fails("a: *nope\n", "t.yaml:1:4: error: unknown alias *nope\n  hint: define the anchor (&name) before using it");
}

static void json_with_tabs(void **state)
{
    struct dt_ydoc *doc = parse_ok("{\n\t\"fp16\": {\n\t\t\"enabled\": \"auto\"\n\t},\n\t\"steps\": 2e8\n}\n");
    const struct dt_ynode *r = dt_ydoc_root(doc);
    assert_string_equal(r->pairs[0].value->pairs[0].value->str, "auto");
    assert_true(r->pairs[0].value->pairs[0].value->quoted);
    assert_string_equal(r->pairs[1].value->str, "2e8");
    dt_ydoc_free(doc);
}

static void refused(void **state)
{
    parse_fails("? [a, b]\n: 1\n", "t.yaml:1:3: error: a key must be a plain name, not a list\n"
                                   "  hint: write keys as plain names such as `lr:`");
    parse_fails("{\"a\": 1, \"a\": 2}", "t.yaml:1:10: error: duplicate key 'a'\n"
                                     "  hint: the first is at line 1, column 2; keep one of them");
}

DT_TESTS(T(locations), T(scalars), T(aliases_share), T(json_with_tabs), T(refused))
