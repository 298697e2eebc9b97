/* status.c - names and exit codes of dt_status_t, generated from DT_STATUS_MAP. */
#include "core/status.h"

const char *dt_status_str(dt_status_t s)
{
    switch (s) {
#define DT_STATUS_STR(name, code, desc) case DT_##name: return desc;
        DT_STATUS_MAP(DT_STATUS_STR)
#undef DT_STATUS_STR
    }
    return "unknown status";
}

int dt_status_exit_code(dt_status_t s)
{
    switch (s) {
#define DT_STATUS_CODE(name, code, desc) case DT_##name: return code;
        DT_STATUS_MAP(DT_STATUS_CODE)
#undef DT_STATUS_CODE
    }
    return 6;
}
