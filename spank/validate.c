/* validate.c - see validate.h. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "spank/validate.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Read both pipes until both close or the deadline passes; false on the deadline. */
static int drain(int out, int err, char *o, size_t on, char *e, size_t en, double deadline)
{
    size_t ol = 0, el = 0;
    struct pollfd p[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        double left = deadline - now();
        if (left <= 0) return 0;
        if (poll(p, 2, (int)(left * 1000) + 1) < 0 && errno != EINTR) return 0;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents) continue;
            char *buf = i ? e : o;
            size_t *len = i ? &el : &ol, cap = i ? en : on;
            char sink[512];
            ssize_t k = *len + 1 < cap ? read(p[i].fd, buf + *len, cap - 1 - *len) : read(p[i].fd, sink, sizeof sink);
            if (k <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
            } else if (*len + 1 < cap) {
                *len += (size_t)k;
            }
        }
    }
    o[ol] = '\0';
    e[el] = '\0';
    return 1;
}

int dt_spank_validate(const char *dtrun, const char *config, double timeout, char *url, size_t url_n, char *msg,
                      size_t msg_n)
{
    url[0] = msg[0] = '\0';
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) != 0) {
        snprintf(msg, msg_n, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(pe, O_CLOEXEC) != 0) {
        snprintf(msg, msg_n, "cannot make a pipe: %s", strerror(errno));
        close(po[0]), close(po[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, msg_n, "cannot fork: %s", strerror(errno));
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        execl(dtrun, "dtrun", "check", config, "--get", "events.webhook.url", (char *)NULL);
        dprintf(2, "cannot run %s: %s\n  hint: install dtrun there, or set dtrun=PATH on the plugin's line in "
                "plugstack.conf", dtrun, strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    char out[4096];
    int done = drain(po[0], pe[0], out, sizeof out, msg, msg_n, now() + timeout);
    if (!done) {
        kill(pid, SIGKILL);
        close(po[0]), close(pe[0]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!done) {
        snprintf(msg, msg_n, "%s check %s did not answer within %.0f s", dtrun, config, timeout);
        return -1;
    }
    size_t ml = strlen(msg);
    while (ml && msg[ml - 1] == '\n') msg[--ml] = '\0';
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        out[strcspn(out, "\n")] = '\0';
        snprintf(url, url_n, "%s", out);
        return 0;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return -1;
    if (!msg[0]) snprintf(msg, msg_n, "%s check %s failed (wait status %d)", dtrun, config, st);
    return 1;
}
