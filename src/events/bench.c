/* bench.c - `dtrun bench events URL`: how many events a second the webhook sender delivers to
 * an endpoint, one event per POST and batched, each event a metrics record's size. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "core/error.h"
#include "events/events.h"
#include "events/webhook.h"
#include "launch/world.h"

dt_status_t dt_events_bench(const char *url, int n, FILE *out)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/dtrun-bench-events.%d", (int)getpid());
    if (mkdir(dir, 0700) != 0)
        return dt_error(DT_ERR_SYSTEM, "%s: error: bench events: cannot make its spool directory: %s", dir,
                        strerror(errno));
    fprintf(out, "# %d events of %s each to %s; the receiver decides most of the rate\n", n, "~600 bytes", url);
    fprintf(out, "%8s %12s %10s %10s %8s\n", "batch", "events/s", "requests", "seconds", "left");
    static const int batches[] = {1, 8, 64};
    dt_status_t rc = DT_SUCCESS;
    char spool[128], doc[1024];
    for (size_t b = 0; b < sizeof batches / sizeof *batches && rc == DT_SUCCESS; b++) {
        snprintf(spool, sizeof spool, "%s/events.spool", dir);
        unlink(spool); /* each batch size starts from nothing */
        struct dt_webhook_cfg c = {.url = url, .batch = batches[b], .queue = n, .connect_timeout = 5, .timeout = 30,
                                   .backoff = 0.1, .max_backoff = 1, .spool = spool};
        struct dt_webhook *w;
        rc = dt_webhook_open(&c, &w);
        if (rc != DT_SUCCESS) break;
        double t0 = dt_now();
        for (int i = 0; i < n; i++) {
            snprintf(doc, sizeof doc, "{\"schema_version\":1,\"id\":\"bench-r0-%d\",\"type\":\"metrics\",\"time\":"
                     "\"2026-01-01T00:00:00.000Z\",\"run_id\":\"bench\",\"run_name\":\"bench\",\"rank\":0,\"job_id\":"
                     "null,\"step_id\":null,\"restart_count\":0,\"step\":%d,\"steps\":%d,\"epoch\":0,\"tokens\":%d,"
                     "\"samples\":%d,\"loss\":3.14159265,\"lr\":0.0003,\"grad_norm\":1.2345678,\"loss_scale\":65536,"
                     "\"skipped_steps\":0,\"tokens_per_s\":123456.789,\"samples_per_s\":1234.56789,\"mfu\":0.4321,"
                     "\"step_ms\":12.345678,\"peak_memory_bytes\":1234567890}", i + 1, i + 1, n, (i + 1) * 1024,
                     (i + 1) * 8);
            dt_webhook_post(w, doc, i + 1);
        }
        struct dt_webhook_stats st;
        dt_webhook_close(w, 60, &st); /* an endpoint that does not answer leaves the rest in "left" */
        double s = dt_now() - t0;
        fprintf(out, "%8d %12.0f %10lld %10.2f %8lld\n", batches[b], (double)st.delivered / s, (long long)st.requests,
                s, (long long)st.left);
    }
    unlink(spool);
    snprintf(spool, sizeof spool, "%s/events.spool.rejected", dir);
    unlink(spool);
    rmdir(dir);
    return rc;
}

dt_status_t dt_events_example(const struct dt_config *cfg, const struct dt_world *w, FILE *out)
{
    struct dt_events ev = {0};
    struct dt_sink *s;
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fileno(out));
    DT_CHECK(dt_sink_jsonl(path, &s));
    ev = (struct dt_events){.rank = w->rank, .cfg = cfg, .sinks = {s}, .nsinks = 1};
    snprintf(ev.run_id, sizeof ev.run_id, "0123456789abcdef");
    snprintf(ev.start, sizeof ev.start, "4f1c9a07");
    snprintf(ev.run_name, sizeof ev.run_name, "%s", cfg->run.name);
    struct dt_run_info info = {.model = "GPT 4 layers", .params = 812544, .steps = 300, .world = "single",
                               .device = "cpu (2 threads)", .strategy = "single", .precision = "bf16-mixed",
                               .param_bytes = 3250176, .grad_bytes = 3250176, .optimizer_bytes = 6500352,
                               .activation_bytes = 22020096};
    struct dt_metrics m = {.step = 10, .steps = 300, .tokens = 10240, .samples = 80, .loss = 4.25, .lr = 3e-4,
                           .grad_norm = 1.5, .loss_scale = 1, .tokens_per_s = 95000, .samples_per_s = 742,
                           .mfu = 0.41, .eta_s = 30, .step_ms = 10.8, .breakdown = true, .forward_ms = 3.1,
                           .backward_ms = 6.2, .comm_ms = 0.9, .optimizer_ms = 0.6, .peak_memory_bytes = 185171968};
    dt_status_t rc = dt_events_run_started(&ev, &info);
    if (rc == DT_SUCCESS) rc = dt_events_metrics(&ev, &m);
    if (rc == DT_SUCCESS) rc = dt_events_eval(&ev, 10, 4.01);
    if (rc == DT_SUCCESS) rc = dt_events_sample(&ev, 10, "Once upon a time", ", there was a fox who jumped.", 9, -21.5);
    if (rc == DT_SUCCESS) rc = dt_events_checkpoint_saved(&ev, 10, "runs/gpt-tiny/ckpt/step-00000010", 19501056, 0.25);
    if (rc == DT_SUCCESS)
        rc = dt_events_checkpoint_failed(&ev, 20, "runs/gpt-tiny/ckpt/step-00000020",
                                         "runs/gpt-tiny/ckpt/step-00000020.partial-4f1c9a07/rank-00000-of-00001.bin.tmp: "
                                         "error: writing the checkpoint failed: No space left on device");
    if (rc == DT_SUCCESS) rc = dt_events_preempted(&ev, 25, "SIGUSR1", true);
    if (rc == DT_SUCCESS) rc = dt_events_run_finished(&ev, 300, 1.25, 1.26, 31.5, 307200);
    if (rc == DT_SUCCESS) rc = dt_events_run_failed(&ev, 7, "dtrun: error: the loss is nan at step 7\n  hint: \"lower\" it");
    dt_events_close(&ev);
    return rc;
}
