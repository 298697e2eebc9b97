/*
 * mem.h - large zeroed buffers (parameters, gradients, optimizer state,
 * activations) on transparent huge pages where the kernel allows it
 * (madvise mode): first touch of 2 GiB then takes 1/512th of the page faults,
 * which on these VMs cost ~15 us each (10 s of the first 124M step otherwise).
 */
#ifndef DT_MEM_H
#define DT_MEM_H

#include <stddef.h>

void *dt_alloc_big(size_t bytes);
void dt_free_big(void *p);

#endif
