/*
 * log.h - leveled, rank-prefixed logging to stderr.
 *
 * DTRUN_DEBUG sets the level (ERROR, WARN, INFO, DEBUG, TRACE; default INFO).
 * DTRUN_DEBUG_SUBSYS limits DEBUG/TRACE lines to a comma list of subsystems
 * (CONFIG, LAUNCH, COMM, TRAIN, EVENTS, CKPT, KERNELS; default all), as NCCL's
 * NCCL_DEBUG / NCCL_DEBUG_SUBSYS do.
 *
 * The prefix rule: once the world is known and has more than one rank, every
 * line a worker writes to stderr (log lines, progress, the final error) starts
 * with "[rank R] ", however it was started (dtrun -n, srun, mpirun); a
 * one-process run writes no prefix. (`dtrun info` reports on stdout, a line
 * per rank that names the rank in its text.)
 */
#ifndef DT_LOG_H
#define DT_LOG_H

enum dt_log_level { DT_LOG_ERROR, DT_LOG_WARN, DT_LOG_INFO, DT_LOG_DEBUG, DT_LOG_TRACE };

enum dt_subsys {
    DT_SUB_CONFIG = 1 << 0,
    DT_SUB_LAUNCH = 1 << 1,
    DT_SUB_COMM = 1 << 2,
    DT_SUB_TRAIN = 1 << 3,
    DT_SUB_EVENTS = 1 << 4,
    DT_SUB_CKPT = 1 << 5,
    DT_SUB_KERNELS = 1 << 6,
};

void dt_log_init(void);
/* Prefix later lines with "[rank R]" when the world has more than one rank; INFO lines then
 * come from rank 0 only, unless DTRUN_DEBUG asks for more. */
void dt_log_set_rank(int rank, int world);
int dt_log_enabled(enum dt_log_level level, unsigned subsys);
/* "[rank R] " in a world of more than one rank, else "": every line a worker writes starts with it. */
const char *dt_log_prefix(void);
/* text (an error message, several lines) to stderr, each line with the prefix, in one write. */
void dt_log_text(const char *text);
void dt_log(enum dt_log_level level, unsigned subsys, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define DT_WARN(...) dt_log(DT_LOG_WARN, ~0u, __VA_ARGS__)
#define DT_INFO(sub, ...) dt_log(DT_LOG_INFO, (sub), __VA_ARGS__)
#define DT_DEBUG(sub, ...) dt_log(DT_LOG_DEBUG, (sub), __VA_ARGS__)
#define DT_TRACE(sub, ...) dt_log(DT_LOG_TRACE, (sub), __VA_ARGS__)

#endif
