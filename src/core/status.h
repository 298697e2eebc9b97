/*
 * status.h - the one status type of all dtrun code, and the exit codes it maps to.
 *
 * Library code returns dt_status_t; the message that goes with a failure is in
 * the error buffer (error.h). Only src/dtrun.c turns a status into an exit code,
 * through dt_status_exit_code(); the codes are part of the CLI contract (--help).
 */
#ifndef DT_STATUS_H
#define DT_STATUS_H

/* XX(name, exit code, description) */
#define DT_STATUS_MAP(XX)                                              \
    XX(SUCCESS, 0, "success")                                          \
    XX(ERR_TRAIN, 1, "training failed")                                \
    XX(ERR_USAGE, 2, "usage error")                                    \
    XX(ERR_CONFIG, 2, "configuration error")                           \
    XX(ERR_DATA, 3, "data error")                                      \
    XX(ERR_COMM, 4, "communication error")                             \
    XX(ERR_CKPT, 5, "checkpoint error")                                \
    XX(ERR_SYSTEM, 6, "system error")                                  \
    XX(ERR_NOMEM, 6, "out of memory")                                  \
    XX(ERR_CUDA, 6, "CUDA error")                                      \
    XX(ERR_INTERNAL, 6, "internal error")                             \
    XX(STOPPED, 75, "stopped by a signal, its state saved")

typedef enum {
#define DT_STATUS_ENUM(name, code, desc) DT_##name,
    DT_STATUS_MAP(DT_STATUS_ENUM)
#undef DT_STATUS_ENUM
} dt_status_t;

const char *dt_status_str(dt_status_t s);
int dt_status_exit_code(dt_status_t s);

/* Return from the calling function when `call` fails (NCCL's NCCLCHECK). */
#define DT_CHECK(call)                         \
    do {                                       \
        dt_status_t dt_rc_ = (call);           \
        if (dt_rc_ != DT_SUCCESS) return dt_rc_; \
    } while (0)

/* Store the failure in `rc` and jump to `label` for cleanup. */
#define DT_CHECK_GOTO(call, rc, label)         \
    do {                                       \
        (rc) = (call);                         \
        if ((rc) != DT_SUCCESS) goto label;    \
    } while (0)

#endif
