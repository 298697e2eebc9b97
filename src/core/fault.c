/* fault.c - see fault.h. */
#include <ctype.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "core/fault.h"

#define MAX_FAULTS 16
#define CLOCK_JUMP 3600 /* seconds a clock fault moves the wall clock by */

static const char *const names[] = {
    "grad_inf", "kill", "stop", "stall", "enospc", "eio", "kill_save", "stop_save", "stall_save", "spool_enospc",
    "spool_eio", "clock_fwd", "clock_back", "slow", "nomem", "hog", "fp8_jump"};
_Static_assert(sizeof names / sizeof names[0] == DT_FAULT_NKINDS, "a name for every enum dt_fault");
static struct {
    enum dt_fault kind;
    int64_t step;
    int rank;
} faults[MAX_FAULTS];
static int nfaults;
/* where the rank is (dt_fault_at), read by other threads (the webhook's sender writes the spool) */
static _Atomic int64_t at_step;
static _Atomic int at_rank;
static _Atomic int64_t wall_offset;

static dt_status_t bad(const char *spec, const char *why)
{
    char kinds[512];
    size_t o = 0;
    for (int k = 0; k < DT_FAULT_NKINDS; k++)
        o += (size_t)snprintf(kinds + o, sizeof kinds - o, "%s%s", k ? (k == DT_FAULT_NKINDS - 1 ? " or " : ", ") : "",
                              names[k]);
    return dt_error(DT_ERR_USAGE, "DTRUN_FAULT: error: '%s': %s\n  hint: KIND@STEP[:RANK], comma-separated; KIND is "
                    "%s (src/core/fault.h)", spec, why, kinds);
}

dt_status_t dt_fault_init(void)
{
    nfaults = 0;
    atomic_store(&at_step, 0);
    atomic_store(&wall_offset, 0);
    const char *env = getenv("DTRUN_FAULT");
    if (!env || !*env) return DT_SUCCESS;
    char buf[512];
    if (strlen(env) >= sizeof buf) return bad("...", "longer than 511 characters");
    snprintf(buf, sizeof buf, "%s", env);
    char *rest = buf;
    for (char *tok; (tok = strsep(&rest, ","));) {
        if (!*tok) return bad(env, "an empty item");
        if (nfaults == MAX_FAULTS) return bad(env, "more than 16 faults");
        char *at = strchr(tok, '@');
        if (!at) return bad(tok, "no @STEP");
        *at = '\0';
        int k = 0;
        while (k < DT_FAULT_NKINDS && strcmp(tok, names[k])) k++;
        if (k == DT_FAULT_NKINDS) return bad(tok, "unknown kind");
        char *end = at + 1, *colon;
        long long step = isdigit((unsigned char)*end) ? strtoll(end, &end, 10) : 0;
        long rank = 0;
        if (*end == ':') {
            colon = end + 1;
            rank = isdigit((unsigned char)*colon) ? strtol(colon, &end, 10) : -1;
        }
        if (*end || step < 1 || rank < 0 || rank > INT_MAX) return bad(at + 1, "STEP must be a number from 1, RANK a rank");
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

bool dt_fault_since(enum dt_fault f, int64_t step, int rank)
{
    for (int i = 0; i < nfaults; i++)
        if (faults[i].kind == f && faults[i].step <= step && faults[i].rank == rank) return true;
    return false;
}

void dt_fault_at(int64_t step, int rank)
{
    atomic_store(&at_rank, rank);
    atomic_store(&at_step, step);
    if (dt_fault_hit(DT_FAULT_CLOCK_FWD, step, rank)) atomic_fetch_add(&wall_offset, CLOCK_JUMP);
    if (dt_fault_hit(DT_FAULT_CLOCK_BACK, step, rank)) atomic_fetch_sub(&wall_offset, CLOCK_JUMP);
}

bool dt_fault_now(enum dt_fault f)
{
    int64_t step = atomic_load(&at_step);
    return step > 0 && dt_fault_hit(f, step, atomic_load(&at_rank));
}

bool dt_fault_now_since(enum dt_fault f)
{
    int64_t step = atomic_load(&at_step);
    return step > 0 && dt_fault_since(f, step, atomic_load(&at_rank));
}

int64_t dt_fault_wall_offset(void) { return atomic_load(&wall_offset); }

void dt_fault_stall_forever(void)
{
    for (;;) pause();
}
