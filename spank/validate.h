/*
 * validate.h - check a user's --dt-config in the user's own srun/sbatch
 * process, before anything is allocated, by running `dtrun check` on it (the
 * plugin never parses configs itself, and never opens a user's path as root).
 */
#ifndef DT_SPANK_VALIDATE_H
#define DT_SPANK_VALIDATE_H

#include <stddef.h>

/* Run `dtrun check CONFIG --get events.webhook.url` within timeout seconds. 0: valid, url
 * holds the webhook the run will use ("" none); 1: invalid, msg holds dtrun's message;
 * -1: dtrun could not be run or did not answer, msg says why. */
int dt_spank_validate(const char *dtrun, const char *config, double timeout, char *url, size_t url_n, char *msg,
                      size_t msg_n);

#endif
