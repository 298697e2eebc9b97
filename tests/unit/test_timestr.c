/* test_timestr.c - Composer durations (REFERENCE.md B6), time spans, shortest doubles. */
#include <stdlib.h>
#include <string.h>
#include "config/timestr.h"
#include "dt_test.h"

static void durations_parse(void **state)
{
    static const struct {
        const char *text;
        int unit;
        double value;
    } cases[] = {
        {"2000ba", DT_TU_BA, 2000}, {"3EP", DT_TU_EP, 3},          {"100000sp", DT_TU_SP, 100000},
        {"5Mtok", DT_TU_TOK, 5e6},  {"1.5ktok", DT_TU_TOK, 1500},  {"0.5ep", DT_TU_EP, 0.5},
        {"2Kba", DT_TU_BA, 2000},   {"1Btok", DT_TU_TOK, 1e9},     {"1e3ba", DT_TU_BA, 1000},
        {"0.1dur", DT_TU_DUR, 0.1}, {"10Gtok", DT_TU_TOK, 1e10},   {"0ba", DT_TU_BA, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dt_duration d;
        char why[256] = "";
        assert_int_equal(dt_duration_parse(cases[i].text, DT_UNITS_INTERVAL, &d, why, sizeof why), 0);
        assert_int_equal(d.unit, cases[i].unit);
        assert_true(d.value == cases[i].value);
    }
}

static void durations_refused(void **state)
{
    static const struct {
        const char *text;
        unsigned units;
        const char *why;
    } cases[] = {
        {"2000", DT_UNITS_TRAIN, "'2000' needs a unit (ba, ep, sp, tok), e.g. 2000ba or 2ep"},
        {"10xyz", DT_UNITS_TRAIN, "'10xyz' has an unknown unit 'xyz'; use ba, ep, sp, tok"},
        {"1.5ba", DT_UNITS_TRAIN, "'1.5ba' must be a whole number of batches"},
        {"2.5sp", DT_UNITS_TRAIN, "'2.5sp' must be a whole number of samples"},
        {"-1ba", DT_UNITS_TRAIN, "'-1ba' is negative"},
        {"30sec", DT_UNITS_TRAIN, "'30sec': wall-clock durations are not training time; use ba, ep, sp, tok"},
        {"0.1dur", DT_UNITS_TRAIN, "'0.1dur': the unit dur is not allowed here; use ba, ep, sp, tok"},
        {"ba", DT_UNITS_TRAIN, "'ba' needs a number before the unit, e.g. 2000ba"},
        {"x1ba", DT_UNITS_TRAIN, "'x1ba': 'x1' is not a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dt_duration d;
        char why[256] = "";
        assert_int_equal(dt_duration_parse(cases[i].text, cases[i].units, &d, why, sizeof why), -1);
        assert_string_equal(why, cases[i].why);
    }
}

/* checkpoint.interval also takes wall time, kept in seconds */
static void wall_durations(void **state)
{
    static const struct {
        const char *text;
        double seconds;
    } cases[] = {{"30min", 1800}, {"2h", 7200}, {"600sec", 600}, {"90s", 90}, {"0.5h", 1800}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dt_duration d;
        char why[256] = "";
        assert_int_equal(dt_duration_parse(cases[i].text, DT_UNITS_WALL, &d, why, sizeof why), 0);
        assert_int_equal(d.unit, DT_TU_SEC);
        assert_true(d.value == cases[i].seconds);
    }
    struct dt_duration d;
    char why[256] = "", buf[64];
    assert_int_equal(dt_duration_parse("500ba", DT_UNITS_WALL, &d, why, sizeof why), 0);
    assert_int_equal(d.unit, DT_TU_BA);
    assert_int_equal(dt_duration_parse("30min", DT_UNITS_INTERVAL, &d, why, sizeof why), -1);
    assert_string_equal(why, "'30min': wall-clock durations are not training time; use ba, ep, sp, tok, dur");
    assert_string_equal(dt_duration_str((struct dt_duration){1800, DT_TU_SEC}, buf, sizeof buf), "1800sec");
}

static void durations_format(void **state)
{
    char buf[64];
    assert_string_equal(dt_duration_str((struct dt_duration){5e6, DT_TU_TOK}, buf, sizeof buf), "5000000tok");
    assert_string_equal(dt_duration_str((struct dt_duration){2, DT_TU_EP}, buf, sizeof buf), "2ep");
    assert_string_equal(dt_duration_str((struct dt_duration){0.25, DT_TU_EP}, buf, sizeof buf), "0.25ep");
    assert_string_equal(dt_duration_str((struct dt_duration){0.1, DT_TU_DUR}, buf, sizeof buf), "0.1dur");
}

static void seconds(void **state)
{
    static const struct {
        const char *text;
        double s;
    } cases[] = {{"600s", 600}, {"10m", 600}, {"1h", 3600}, {"250ms", 0.25}, {"90", 90}, {"1d", 86400}, {"2min", 120}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double v;
        char why[256];
        assert_int_equal(dt_seconds_parse(cases[i].text, &v, why, sizeof why), 0);
        assert_true(v == cases[i].s);
    }
    double v;
    char why[256];
    assert_int_equal(dt_seconds_parse("5y", &v, why, sizeof why), -1);
    assert_string_equal(why, "'5y' has an unknown unit 'y'; use ms, s, m, h or d");
    assert_int_equal(dt_seconds_parse("soon", &v, why, sizeof why), -1);
    assert_string_equal(why, "'soon' is not a time span; write e.g. 600s, 10m or 1h");
    char buf[64];
    assert_string_equal(dt_seconds_str(600, buf, sizeof buf), "600s");
    assert_string_equal(dt_seconds_str(0.25, buf, sizeof buf), "0.25s");
}

static void shortest_double(void **state)
{
    char buf[64];
    assert_string_equal(dt_double_str(3e-4, buf, sizeof buf), "0.0003");
    assert_string_equal(dt_double_str(0.1, buf, sizeof buf), "0.1");
    assert_string_equal(dt_double_str(25, buf, sizeof buf), "25.0");
    assert_string_equal(dt_double_str(1e-8, buf, sizeof buf), "1e-08");
    assert_string_equal(dt_double_str(762.939453125, buf, sizeof buf), "762.939453125");
    double x = 0.1 + 0.2;
    assert_true(strtod(dt_double_str(x, buf, sizeof buf), NULL) == x);
}

DT_TESTS(T(durations_parse), T(durations_refused), T(wall_durations), T(durations_format), T(seconds), T(shortest_double))
