/* dirlock.c - see dirlock.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "core/dirlock.h"
#include "core/error.h"
#include "core/slurm_job.h"
#include "core/log.h"

/* who holds (or wants) a lock */
struct holder {
    char host[256], boot[64], node[64], job[32], since[32];
    long pid;
    unsigned long long start; /* the process's start time, clock ticks after boot (/proc/PID/stat) */
    int restart;
};

/* ---- the locks this process holds, for the exits that skip dt_dirlock_release */

#define MAX_HELD 4
static char held_paths[MAX_HELD][4200];
static volatile sig_atomic_t held_used[MAX_HELD];
static struct sigaction old_actions[3];
static const int caught[3] = {SIGINT, SIGTERM, SIGHUP};
static int handlers_installed;

void dt_dirlock_release_all(void)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (held_used[i]) {
            unlink(held_paths[i]);
            held_used[i] = 0;
        }
}

/* Release, then die of the signal as if nobody had caught it. */
static void on_fatal_signal(int sig)
{
    dt_dirlock_release_all();
    for (int i = 0; i < 3; i++)
        if (caught[i] == sig) sigaction(sig, &old_actions[i], NULL);
    raise(sig);
}

static void remember(const char *path)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (!held_used[i]) {
            snprintf(held_paths[i], sizeof held_paths[i], "%s", path);
            held_used[i] = 1;
            break;
        }
    if (handlers_installed) return;
    handlers_installed = 1;
    struct sigaction sa = {.sa_handler = on_fatal_signal};
    sigemptyset(&sa.sa_mask);
    /* a handler someone else installed stays in place: only the default action gets ours */
    for (int i = 0; i < 3; i++) {
        sigaction(caught[i], NULL, &old_actions[i]);
        if (old_actions[i].sa_handler == SIG_DFL) sigaction(caught[i], &sa, NULL);
    }
}

static void forget(const char *path)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (held_used[i] && !strcmp(held_paths[i], path)) held_used[i] = 0;
}

/* ---- holders */

static unsigned long long proc_start(long pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* field 22, counted after the command name, which may hold spaces and parentheses */
    char *s = strrchr(buf, ')');
    unsigned long long start = 0;
    char state = 0;
    if (!s || sscanf(s + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &state, &start) != 2)
        return 0;
    /* a zombie (killed, not yet reaped by its parent) holds nothing any more */
    return state == 'Z' || state == 'X' ? 0 : start;
}

static void read_line(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fgets(buf, (int)n, f)) buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static void me(struct holder *h)
{
    *h = (struct holder){.pid = (long)getpid()};
    gethostname(h->host, sizeof h->host - 1);
    read_line("/proc/sys/kernel/random/boot_id", h->boot, sizeof h->boot);
    h->start = proc_start(h->pid);
    const char *job = getenv("SLURM_JOB_ID"), *node = getenv("SLURMD_NODENAME"), *rc = getenv("SLURM_RESTART_COUNT");
    snprintf(h->job, sizeof h->job, "%s", job ? job : "");
    snprintf(h->node, sizeof h->node, "%s", node ? node : "");
    h->restart = rc ? atoi(rc) : 0;
    time_t t = dt_wall_now().tv_sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(h->since, sizeof h->since, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int format(const struct holder *h, char *buf, size_t n)
{
    return snprintf(buf, n, "host=%s\nboot_id=%s\npid=%ld\nstart=%llu\nslurm_job=%s\nslurm_restart=%d\nslurm_node=%s\n"
                    "since=%s\n", h->host, h->boot, h->pid, h->start, h->job, h->restart, h->node, h->since);
}

/* 0, or -1 when the file is gone or is not a lock file */
static int parse(const char *path, struct holder *h)
{
    *h = (struct holder){0};
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int fields = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *v = strchr(line, '=');
        if (!v) continue;
        *v++ = '\0';
        fields++;
        if (!strcmp(line, "host")) snprintf(h->host, sizeof h->host, "%s", v);
        else if (!strcmp(line, "boot_id")) snprintf(h->boot, sizeof h->boot, "%s", v);
        else if (!strcmp(line, "pid")) h->pid = atol(v);
        else if (!strcmp(line, "start")) h->start = strtoull(v, NULL, 10);
        else if (!strcmp(line, "slurm_job")) snprintf(h->job, sizeof h->job, "%s", v);
        else if (!strcmp(line, "slurm_restart")) h->restart = atoi(v);
        else if (!strcmp(line, "slurm_node")) snprintf(h->node, sizeof h->node, "%s", v);
        else if (!strcmp(line, "since")) snprintf(h->since, sizeof h->since, "%s", v);
        else fields--;
    }
    fclose(f);
    return fields >= 3 && h->pid > 0 ? 0 : -1;
}

static bool same_holder(const struct holder *a, const struct holder *b)
{
    return a->pid == b->pid && a->start == b->start && !strcmp(a->boot, b->boot) && !strcmp(a->host, b->host);
}

/* "dtrun pid 4242 on host n1 (Slurm job 17, restart 0, node n1), since 2026-...Z" */
static void describe(const struct holder *h, char *buf, size_t n)
{
    int o = snprintf(buf, n, "dtrun pid %ld on host %s", h->pid, h->host);
    if (h->job[0] && o > 0 && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, " (Slurm job %s, restart %d%s%s)", h->job, h->restart,
                      h->node[0] ? ", node " : "", h->node);
    if (o > 0 && (size_t)o < n) snprintf(buf + o, n - (size_t)o, ", since %s", h->since);
}

/* 1: the holder is provably gone (why says how we know); 0: alive, or not provably gone (why says why) */
static int stale(const struct holder *h, const struct holder *self, char *why, size_t n)
{
    if (!strcmp(h->boot, self->boot) && h->boot[0]) {
        unsigned long long s = proc_start(h->pid);
        if (s && s == h->start) {
            snprintf(why, n, "it is running");
            return 0;
        }
        snprintf(why, n, "no process %ld%s runs on this machine", h->pid, s ? " with that start time" : "");
        return 1;
    }
    if (!h->job[0]) {
        snprintf(why, n, "it ran on another machine and outside Slurm, so whether it still runs cannot be known here");
        return 0;
    }
    char err[512];
    struct dt_slurm_job j;
    if (!dt_slurm_job_show(h->job, &j, err, sizeof err)) {
        snprintf(why, n, "it runs on another machine and Slurm cannot say whether job %s still runs (%s)", h->job, err);
        return 0;
    }
    static const char *const live[] = {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "SIGNALING", "STAGE_OUT",
                                       "STOPPED", "RESIZING", NULL};
    bool running = false;
    for (int i = 0; live[i]; i++) running |= !strcmp(j.state, live[i]);
    if (running && j.restarts > h->restart) {
        snprintf(why, n, "Slurm requeued job %s since (restart %d now)", h->job, j.restarts);
        return 1;
    }
    if (running) {
        snprintf(why, n, "Slurm job %s is %s", h->job, j.state);
        return 0;
    }
    snprintf(why, n, "Slurm job %s is %s", h->job, j.state);
    return 1;
}

/* ---- taking and releasing */

static dt_status_t write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot write a lock file: %s", path, strerror(errno));
    size_t len = strlen(text);
    ssize_t k = write(fd, text, len);
    int e = errno;
    if (k != (ssize_t)len || fsync(fd) != 0) {
        close(fd);
        unlink(path);
        return dt_error(DT_ERR_SYSTEM, "%s: error: writing a lock file failed: %s", path,
                        k < 0 ? strerror(e) : "short write");
    }
    close(fd);
    return DT_SUCCESS;
}

/* Create path from tmp, exclusively: 0, or the errno (EEXIST: someone holds it). */
static int create(const char *tmp, const char *path, const char *text)
{
    if (link(tmp, path) == 0) return 0;
    int e = errno;
    if (e != EPERM && e != ENOTSUP && e != EOPNOTSUPP && e != ENOSYS) return e;
    /* a file system without hard links: O_EXCL, atomic on local file systems and NFSv3+ */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return errno;
    ssize_t k = write(fd, text, strlen(text));
    fsync(fd);
    close(fd);
    return k == (ssize_t)strlen(text) ? 0 : EIO;
}

dt_status_t dt_dirlock_take(struct dt_dirlock *l, const char *dir, const char *what)
{
    struct holder self, h;
    me(&self);
    *l = (struct dt_dirlock){0};
    snprintf(l->path, sizeof l->path, "%s/%s", dir, DT_DIRLOCK_FILE);
    char tmp[4400], takeover[4300], text[1024], who[512], why[600];
    snprintf(tmp, sizeof tmp, "%s/.%s.%s.%ld", dir, DT_DIRLOCK_FILE, self.host, self.pid);
    snprintf(takeover, sizeof takeover, "%s.takeover", l->path);
    format(&self, text, sizeof text);
    DT_CHECK(write_file(tmp, text));
    dt_status_t rc = DT_SUCCESS;
    for (int attempt = 0; attempt < 50 && !l->held && rc == DT_SUCCESS; attempt++) {
        int e = create(tmp, l->path, text);
        if (e == 0) {
            l->held = true;
            break;
        }
        if (e != EEXIST) {
            rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot create the %s lock: %s\n  hint: is %s writable?", l->path,
                          what, strerror(e), dir);
            break;
        }
        if (parse(l->path, &h) != 0) { /* released meanwhile, or still being written */
            nanosleep(&(struct timespec){0, 20000000}, NULL);
            continue;
        }
        describe(&h, who, sizeof who);
        if (!stale(&h, &self, why, sizeof why)) {
            rc = dt_error(DT_ERR_CONFIG, "%s: error: %s %s is in use by %s: %s\n  hint: give this run another %s, or "
                          "wait for that run to end; if you know it has ended, remove %s", l->path, what, dir, who,
                          why, what, l->path);
            break;
        }
        /* one taker at a time: whoever creates the takeover file re-checks and replaces the lock */
        e = create(tmp, takeover, text);
        if (e == EEXIST) {
            struct holder t;
            char twhy[600];
            if (parse(takeover, &t) == 0 && stale(&t, &self, twhy, sizeof twhy)) unlink(takeover);
            nanosleep(&(struct timespec){0, 20000000}, NULL);
            continue;
        }
        if (e != 0) {
            rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot take over the %s lock: %s", takeover, what, strerror(e));
            break;
        }
        struct holder again;
        if (parse(l->path, &again) == 0 && same_holder(&again, &h)) {
            unlink(l->path);
            if (create(tmp, l->path, text) == 0) {
                l->held = true;
                DT_WARN("%s: took over the %s lock of %s, which is gone (%s)", l->path, what, who, why);
            }
        }
        unlink(takeover);
    }
    unlink(tmp);
    if (rc == DT_SUCCESS && !l->held)
        rc = dt_error(DT_ERR_SYSTEM, "%s: error: the %s lock changed hands 50 times while this run tried to take it\n"
                      "  hint: several runs are starting in %s at once; give each its own %s", l->path, what, dir, what);
    if (l->held) remember(l->path);
    return rc;
}

void dt_dirlock_release(struct dt_dirlock *l)
{
    if (!l->held) return;
    forget(l->path);
    unlink(l->path);
    l->held = false;
}
