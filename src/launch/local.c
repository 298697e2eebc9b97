/*
 * local.c - `dtrun -n N`: start N workers on this machine through Open MPI's
 * mpirun (which also serves PMIx to them), stream their output prefixed by
 * rank, and end with the exit code of the first worker that failed (mpirun
 * stops the others when one fails). Ctrl-C or SIGTERM asks the workers to
 * save a checkpoint and stop (SIGUSR1, which mpirun forwards; the trainer's
 * signals.h); a second one, or a worker that has not stopped in GRACE
 * seconds, stops them at once (SIGTERM to mpirun, then SIGKILL). The
 * launcher is its descendants' subreaper: no worker outlives it. Each worker
 * notes the step it is in on the launcher's step board (a memfd of one int64
 * a rank, DTRUN_STEP_BOARD), so that a rank killed by a signal is reported
 * with its step.
 */
#define _GNU_SOURCE /* memfd_create */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "core/error.h"
#include "launch/launch.h"

#define GRACE 300.0 /* seconds for the workers to save and stop */

static volatile sig_atomic_t got_signal, signals;
static void on_signal(int sig)
{
    if (!got_signal) got_signal = sig;
    signals++;
}

/* Our children now: the workers mpirun left behind, reparented to us (the subreaper). */
static void kill_children(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = '\0';
        const char *rp = strrchr(buf, ')'); /* the name may hold anything; the fields follow its ')' */
        long ppid = 0;
        if (rp && sscanf(rp + 1, " %*c %ld", &ppid) == 1 && ppid == (long)getpid()) kill(atoi(e->d_name), SIGKILL);
    }
    if (d) closedir(d);
}

/* Reap every worker mpirun left behind within 10 s, then kill what is left (again each pass, for the
 * ones reparented meanwhile) and reap it within 10 s more: a worker still running after the launcher
 * returned would hold the run's directory. */
static void reap_orphans(void)
{
    double start = dt_now();
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p < 0 && errno != EINTR) return; /* ECHILD: none left */
        if (p > 0) continue;
        double t = dt_now() - start;
        if (t > 20) {
            fprintf(stderr, "dtrun: warning: a worker survived SIGKILL for 10 s; giving up waiting for it\n");
            return;
        }
        if (t > 10) kill_children();
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- the step board */

#define BOARD_ENV "DTRUN_STEP_BOARD"

static volatile int64_t *map_board(int fd, size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

void dt_launch_note_step(int rank, int64_t step)
{
    static volatile int64_t *board;
    static size_t slots;
    static bool tried;
    if (!tried) {
        tried = true;
        const char *path = getenv(BOARD_ENV);
        int fd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
            slots = (size_t)st.st_size / sizeof *board;
            board = map_board(fd, slots * sizeof *board);
        }
        if (fd >= 0) close(fd);
    }
    if (board && rank >= 0 && (size_t)rank < slots) board[rank] = step;
}

/* " in step N" (and the like) for a rank's slot, or "" without a board */
static void step_of(volatile const int64_t *board, int n, int rank, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!board || rank < 0 || rank >= n) return;
    int64_t v = board[rank];
    if (v == 0) snprintf(buf, len, " before its first step");
    else if (v > 0) snprintf(buf, len, " in step %lld", (long long)v);
    else snprintf(buf, len, " at exit, after its last step (%lld)", (long long)-v);
}

struct stream {
    int fd;
    FILE *out;
    char buf[65536];
    size_t len;
};

struct failure {
    int rank, code, sig;
    char signame[32];
};

/* mpirun tags worker lines "[job,rank]<stdout>:" (--tag-output); ours say "[rank R] ". */
static void emit_line(char *line, FILE *out, struct failure *f)
{
    int job, rank, n = 0;
    char which[8];
    if (sscanf(line, "[%d,%d]<%7[a-z]>:%n", &job, &rank, which, &n) == 3 && n > 0) {
        char own[32];
        int k = snprintf(own, sizeof own, "[rank %d]", rank);
        if (strncmp(line + n, own, (size_t)k) == 0) fprintf(out, "%s\n", line + n);
        else fprintf(out, "[rank %d] %s\n", rank, line + n);
        return;
    }
    /* mpirun's own report of who failed first */
    int r, pid, sig;
    char name[32];
    if (sscanf(line, "mpirun noticed that process rank %d with PID %d on node %*s exited on signal %d (%31[^)])", &r,
               &pid, &sig, name) == 4 && f->rank < 0) {
        f->rank = r;
        f->sig = sig;
        snprintf(f->signame, sizeof f->signame, "%s", name);
    }
    int a, b;
    if (sscanf(line, "  Process name: [[%d,%d],%d]", &a, &b, &r) == 3 && f->rank < 0) f->rank = r;
    if (sscanf(line, "  Exit code: %d", &a) == 1) f->code = a;
    fprintf(out, "%s\n", line);
}

/* Read what is there; write out each complete line. Returns false at end of file. */
static bool pump(struct stream *s, struct failure *f, bool flush)
{
    ssize_t r = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    bool eof = r <= 0;
    if (r > 0) s->len += (size_t)r;
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] != '\n') continue;
        s->buf[i] = '\0';
        emit_line(s->buf + start, s->out, f);
        start = i + 1;
    }
    if (start == 0 && (s->len == sizeof s->buf - 1 || ((eof || flush) && s->len > 0))) {
        s->buf[s->len] = '\0'; /* a line longer than the buffer, or the last one without '\n' */
        emit_line(s->buf, s->out, f);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    fflush(s->out);
    return !eof;
}

dt_status_t dt_launch_local(int n, int argc, char **argv, int *exit_code)
{
    *exit_code = 0;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot find this program (/proc/self/exe): %s",
                                  strerror(errno));
    self[len] = '\0';
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus > n ? (int)(cpus / n) : 1;
    char nbuf[16], tbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    /* No binding: a rank's communication thread then runs wherever a core is free instead of taking
     * turns with its compute thread (bench/ddp_overhead.sh: a few percent of the step). */
    const char *bind = "none";
    char **args = calloc((size_t)argc + 16, sizeof *args);
    if (!args) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-n";
    args[k++] = nbuf;
    args[k++] = "--oversubscribe";
    args[k++] = "--tag-output";
    args[k++] = "--bind-to";
    args[k++] = (char *)bind;
    args[k++] = "-x";
    args[k++] = "OMP_NUM_THREADS";
    args[k++] = self;
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;

    int out[2], err[2];
    if (pipe(out) || pipe(err)) {
        free(args);
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: pipe: %s", strerror(errno));
    }
    /* the step board: without one (no memfd), the report just has no step */
    volatile int64_t *board = NULL;
    size_t board_bytes = (size_t)n * sizeof *board;
    int bfd = memfd_create("dtrun-steps", MFD_CLOEXEC);
    if (bfd >= 0 && ftruncate(bfd, (off_t)board_bytes) == 0 && (board = map_board(bfd, board_bytes))) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/fd/%d", (long)getpid(), bfd);
        setenv(BOARD_ENV, path, 1); /* the workers open it by that name (mpirun closes inherited fds) */
    }
    /* the workers mpirun leaves behind become ours to reap (without it, reap_orphans has none) */
    bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        free(args);
        if (board) munmap((void *)board, board_bytes);
        if (bfd >= 0) close(bfd);
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: fork: %s", strerror(e));
    }
    if (pid == 0) {
        setpgid(0, 0);                    /* Ctrl-C reaches the launcher, which stops the job in order */
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* and a killed launcher takes mpirun with it */
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]);
        close(err[0]);
        close(out[1]);
        close(err[1]);
        setenv("OMP_NUM_THREADS", tbuf, 0);
        if (geteuid() == 0) { /* Open MPI refuses root unless told twice */
            setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
            setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        }
        execvp("mpirun", args);
        fprintf(stderr, "dtrun: error: cannot run mpirun: %s\n  hint: `dtrun -n N` starts its workers through Open "
                "MPI; install openmpi-bin\n", strerror(errno));
        _exit(127);
    }
    free(args);
    close(out[1]);
    close(err[1]);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    struct stream so = {.fd = out[0], .out = stdout}, se = {.fd = err[0], .out = stderr};
    struct failure f = {.rank = -1};
    bool open_out = true, open_err = true;
    double term_at = 0, kill_at = 0;
    int forwarded = 0, told = 0;
    while (open_out || open_err) {
        struct pollfd p[2] = {{open_out ? so.fd : -1, POLLIN, 0}, {open_err ? se.fd : -1, POLLIN, 0}};
        int r = poll(p, 2, 100);
        if (r > 0) {
            if (p[0].revents) open_out = pump(&so, &f, false);
            if (p[1].revents) open_err = pump(&se, &f, false);
        }
        if (got_signal && !forwarded) {
            forwarded = got_signal;
            told = signals;
            fprintf(stderr, "dtrun: %s: the worker%s save a checkpoint and stop (%s again to stop at once)\n",
                    strsignal(forwarded), n > 1 ? "s" : "", forwarded == SIGINT ? "Ctrl-C" : "signal");
            kill(pid, SIGUSR1);
            term_at = dt_now() + GRACE;
        }
        if ((forwarded && signals > told) || (term_at > 0 && dt_now() > term_at)) {
            fprintf(stderr, "dtrun: stopping %d worker%s now\n", n, n > 1 ? "s" : "");
            kill(pid, SIGTERM);
            told = signals;
            term_at = 0;
            kill_at = dt_now() + 10;
        }
        if (kill_at > 0 && dt_now() > kill_at) {
            kill(-pid, SIGKILL);
            kill_at = 0;
        }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (subreaper) reap_orphans();
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(out[0]);
    close(err[0]);
    char at[64];
    step_of(board, n, f.rank, at, sizeof at);
    if (board) munmap((void *)board, board_bytes);
    if (bfd >= 0) close(bfd);
    unsetenv(BOARD_ENV);
    if (forwarded) { /* the workers' verdict when they stopped by themselves (75: saved, stopped) */
        *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + forwarded;
        return DT_SUCCESS;
    }
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (*exit_code == 127 && f.rank < 0) return DT_SUCCESS; /* mpirun missing: the child said so */
    if (f.rank >= 0 && f.sig)
        fprintf(stderr, "dtrun: rank %d was killed by signal %d (%s)%s; the other ranks were stopped (exit %d)\n",
                f.rank, f.sig, f.signame, at, *exit_code);
    else if (f.rank >= 0)
        fprintf(stderr, "dtrun: rank %d failed first (exit code %d)%s; the other ranks were stopped\n", f.rank,
                f.code ? f.code : *exit_code, at);
    return DT_SUCCESS;
}
