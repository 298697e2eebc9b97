/* log.c - see log.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "core/log.h"

static enum dt_log_level level = DT_LOG_INFO;
static unsigned subsys_mask = ~0u;
static int log_rank = -1;

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"CONFIG", DT_SUB_CONFIG}, {"LAUNCH", DT_SUB_LAUNCH}, {"COMM", DT_SUB_COMM},     {"TRAIN", DT_SUB_TRAIN},
    {"EVENTS", DT_SUB_EVENTS}, {"CKPT", DT_SUB_CKPT},     {"KERNELS", DT_SUB_KERNELS},
};
static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
static const char *const level_tags[] = {"error: ", "warning: ", "", "debug: ", "trace: "};

void dt_log_init(void)
{
    const char *lv = getenv("DTRUN_DEBUG");
    if (lv && *lv) {
        for (int i = 0; i <= DT_LOG_TRACE; i++)
            if (strcasecmp(lv, level_names[i]) == 0) level = (enum dt_log_level)i;
    }
    const char *ss = getenv("DTRUN_DEBUG_SUBSYS");
    if (ss && *ss) {
        subsys_mask = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ss);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
                if (strcasecmp(tok, subsys_names[i].name) == 0) subsys_mask |= subsys_names[i].bit;
    }
}

static char prefix[32];

void dt_log_set_rank(int rank, int world)
{
    log_rank = world > 1 ? rank : -1;
    if (log_rank >= 0) snprintf(prefix, sizeof prefix, "[rank %d] ", rank);
    else prefix[0] = '\0';
}

const char *dt_log_prefix(void) { return prefix; }

void dt_log_text(const char *text)
{
    size_t plen = strlen(prefix), n = strlen(text), lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    char *out = malloc(n + lines * plen + 2);
    if (!out) { /* say it anyway, unprefixed */
        fprintf(stderr, "%s\n", text);
        return;
    }
    size_t o = 0;
    for (const char *line = text;;) {
        size_t len = strcspn(line, "\n");
        memcpy(out + o, prefix, plen);
        memcpy(out + o + plen, line, len);
        o += plen + len;
        out[o++] = '\n';
        if (!line[len]) break;
        line += len + 1;
    }
    out[o] = '\0';
    fputs(out, stderr);
    free(out);
}

int dt_log_enabled(enum dt_log_level lv, unsigned subsys)
{
    if (lv > level) return 0;
    /* progress and summaries come from rank 0 (Lightning's rank_zero_info); the rest only with DTRUN_DEBUG */
    if (lv == DT_LOG_INFO && log_rank > 0 && level < DT_LOG_DEBUG) return 0;
    return lv <= DT_LOG_INFO || (subsys & subsys_mask) != 0;
}

void dt_log(enum dt_log_level lv, unsigned subsys, const char *fmt, ...)
{
    if (!dt_log_enabled(lv, subsys)) return;
    char body[4096], line[4096 + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    /* every line of a message carries the rank's prefix (a hint's too: under srun without --label
     * it is all that says which rank wrote it); one fputs per message keeps it whole when threads
     * log at once */
    size_t o = (size_t)snprintf(line, sizeof line, "%sdtrun: %s", prefix, level_tags[lv]), plen = strlen(prefix);
    for (const char *b = body; *b && o + plen + 2 < sizeof line; b++) {
        line[o++] = *b;
        if (*b == '\n' && b[1]) {
            memcpy(line + o, prefix, plen);
            o += plen;
        }
    }
    line[o++] = '\n';
    line[o] = '\0';
    fputs(line, stderr);
}
