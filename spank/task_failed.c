/* task_failed.c - see task_failed.h. */
#define _GNU_SOURCE /* sigabbrev_np */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include "events/json.h"
#include "events/sign.h"
#include "spank/task_failed.h"

bool dt_task_failed_wanted(int status, bool is_dtrun)
{
    if (WIFSIGNALED(status)) return true;
    return !is_dtrun && WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

char *dt_task_failed_json(const struct dt_task_end *e, double now)
{
    struct dt_json j = {0};
    char id[96], t[40], job[16], step[16];
    dt_json_begin(&j);
    dt_json_int(&j, "schema_version", 1);
    snprintf(id, sizeof id, "slurm-%u-%u.%u-t%d", e->job, e->restart, e->step, e->task);
    dt_json_str(&j, "id", id);
    dt_json_str(&j, "type", "task_failed");
    time_t s = (time_t)now;
    dt_json_iso_time(s, (int)((now - (double)s) * 1000) % 1000, t, sizeof t);
    dt_json_str(&j, "time", t);
    dt_json_str(&j, "run_name", e->run_name);
    snprintf(job, sizeof job, "%u", e->job);
    snprintf(step, sizeof step, "%u", e->step);
    dt_json_str(&j, "job_id", job);
    dt_json_str(&j, "step_id", step);
    dt_json_int(&j, "restart_count", e->restart);
    dt_json_str(&j, "node", e->node);
    dt_json_int(&j, "node_rank", e->node_rank);
    dt_json_int(&j, "rank", e->task);
    dt_json_int(&j, "local_rank", e->local_task);
    dt_json_int(&j, "pid", e->pid);
    if (WIFSIGNALED(e->status)) {
        const char *name = sigabbrev_np(WTERMSIG(e->status));
        char sig[32];
        snprintf(sig, sizeof sig, "SIG%s", name ? name : "?");
        dt_json_str(&j, "signal", name ? sig : NULL);
        dt_json_int(&j, "signal_number", WTERMSIG(e->status));
        dt_json_null(&j, "exit_status");
        dt_json_bool(&j, "core_dumped", WCOREDUMP(e->status));
    } else {
        dt_json_null(&j, "signal");
        dt_json_null(&j, "signal_number");
        dt_json_int(&j, "exit_status", WIFEXITED(e->status) ? WEXITSTATUS(e->status) : -1);
        dt_json_bool(&j, "core_dumped", false);
    }
    if (e->oom < 0) dt_json_null(&j, "oom_killed");
    else dt_json_bool(&j, "oom_killed", e->oom > 0);
    const char *doc = dt_json_end(&j);
    char *out = doc ? strdup(doc) : NULL;
    dt_json_free(&j);
    return out;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p, (void)ctx;
    return size * n;
}

/* Whether libcurl reads the same host out of url as the allow-list check did. */
static bool same_host(const char *url, const char *host)
{
    CURLU *u = curl_url();
    char *h = NULL;
    bool same = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
                curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK && h;
    if (same) {
        size_t len = strlen(h);
        const char *p = h;
        if (len >= 2 && h[0] == '[' && h[len - 1] == ']') p++, len -= 2; /* IPv6 */
        same = strlen(host) == len && !strncasecmp(p, host, len);
    }
    curl_free(h);
    curl_url_cleanup(u);
    return same;
}

int dt_task_failed_post(const char *url, const char *host, const char *secret, const char *json, double timeout,
                        char *why, size_t n)
{
    why[0] = '\0';
    if (!same_host(url, host)) {
        snprintf(why, n, "libcurl reads another host out of the URL than the allow-list check did; not sent");
        return -1;
    }
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, n, "libcurl could not start");
        return -1;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (secret && *secret) {
        char ts[32], sig[72], line[128];
        snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
        if (dt_sign(secret, ts, json, strlen(json), sig) != 0) {
            curl_slist_free_all(h);
            curl_easy_cleanup(c);
            snprintf(why, n, "it could not be signed (HMAC-SHA256 in libcrypto failed); not sent unsigned");
            return -1;
        }
        snprintf(line, sizeof line, "X-Dtrun-Timestamp: %s", ts);
        h = curl_slist_append(h, line);
        snprintf(line, sizeof line, "X-Dtrun-Signature: %s", sig);
        h = curl_slist_append(h, line);
    }
    long ms = (long)(timeout * 1000);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms > 1 ? ms : 1);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms > 1 ? ms : 1);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* slurmstepd's own signals stay its own */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "dtrun-spank");
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (cc != CURLE_OK) snprintf(why, n, "%s", curl_easy_strerror(cc));
    else if (code < 200 || code >= 300) snprintf(why, n, "HTTP %ld", code);
    return why[0] ? -1 : 0;
}

long dt_oom_kills(const char *dir)
{
    char path[4200], line[128];
    snprintf(path, sizeof path, "%s/memory.events", dir);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    long kills = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "oom_kill %ld", &kills) == 1) break;
    fclose(f);
    return kills;
}

void dt_cgroup_dir(long pid, char *dir, size_t n)
{
    char path[64], line[4096];
    dir[0] = '\0';
    snprintf(path, sizeof path, "/proc/%ld/cgroup", pid);
    FILE *f = fopen(path, "re");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "0::", 3)) { /* the cgroup v2 line */
            snprintf(dir, n, "/sys/fs/cgroup%s", line + 3);
            break;
        }
    }
    fclose(f);
}
