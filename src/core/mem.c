/* mem.c - see mem.h. A 64-byte header keeps the mapping length for dt_free_big. */
#include <stdint.h>
#include <sys/mman.h>
#include "core/mem.h"

#define HEADER 64

void *dt_alloc_big(size_t bytes)
{
    size_t len = bytes + HEADER;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    if (len >= (2u << 20)) madvise(p, len, MADV_HUGEPAGE);
#endif
    *(size_t *)p = len;
    return (char *)p + HEADER;
}

void dt_free_big(void *p)
{
    if (!p) return;
    char *base = (char *)p - HEADER;
    munmap(base, *(size_t *)base);
}
