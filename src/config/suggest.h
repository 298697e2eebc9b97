/* suggest.h - "did you mean" for misspelled keys and names (edit distance). */
#ifndef DT_SUGGEST_H
#define DT_SUGGEST_H

#include <stddef.h>

/* The candidate closest to `word` (case-insensitive edit distance at most
 * max(1, len/3)), or NULL when none is close. */
const char *dt_suggest(const char *word, const char *const *cands, size_t n);

#endif
