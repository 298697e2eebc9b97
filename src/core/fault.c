/* fault.c - see fault.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "core/fault.h"

#define MAX_FAULTS 16

static const char *const names[DT_FAULT_NKINDS] = {"grad_inf", "kill", "stall", "enospc", "kill_save"};
static struct {
    enum dt_fault kind;
    int64_t step;
    int rank;
} faults[MAX_FAULTS];
static int nfaults;

static dt_status_t bad(const char *spec, const char *why)
{
    return dt_error(DT_ERR_USAGE, "DTRUN_FAULT: error: '%s': %s\n  hint: KIND@STEP[:RANK], comma-separated; KIND is "
                    "grad_inf, kill, stall, enospc or kill_save (src/core/fault.h)", spec, why);
}

dt_status_t dt_fault_init(void)
{
    nfaults = 0;
    const char *env = getenv("DTRUN_FAULT");
    if (!env || !*env) return DT_SUCCESS;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (nfaults == MAX_FAULTS) return bad(env, "more than 16 faults");
        char *at = strchr(tok, '@');
        if (!at) return bad(tok, "no @STEP");
        *at = '\0';
        int k = 0;
        while (k < DT_FAULT_NKINDS && strcmp(tok, names[k])) k++;
        if (k == DT_FAULT_NKINDS) return bad(tok, "unknown kind");
        char *end;
        long long step = strtoll(at + 1, &end, 10);
        long rank = 0;
        if (*end == ':') rank = strtol(end + 1, &end, 10);
        if (*end || step < 1 || rank < 0) return bad(at + 1, "STEP must be a number from 1, RANK a rank");
        faults[nfaults].kind = (enum dt_fault)k;
        faults[nfaults].step = step;
        faults[nfaults++].rank = (int)rank;
    }
    return DT_SUCCESS;
}

bool dt_fault_hit(enum dt_fault f, int64_t step, int rank)
{
    for (int i = 0; i < nfaults; i++)
        if (faults[i].kind == f && faults[i].step == step && faults[i].rank == rank) return true;
    return false;
}

void dt_fault_stall_forever(void)
{
    for (;;) pause();
}
