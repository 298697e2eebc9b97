/*
 * device.c - what `dtrun info` says about one GPU: its name, memory and compute capability from
 * the CUDA runtime, its PCI bus id, and the NUMA node the kernel attaches that PCI device to
 * (sysfs), which decides where a rank's host buffers should live. Part of the CUDA module.
 */
#include <ctype.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cuda/module.h"
#include "kernels/cuda/probe.h"

/* sysfs names PCI devices in lower case: /sys/bus/pci/devices/0000:3b:00.0/numa_node */
static int numa_node_of(const char *bus_id)
{
    char path[96], lower[32];
    size_t i = 0;
    for (; bus_id[i] && i + 1 < sizeof lower; i++) lower[i] = (char)tolower((unsigned char)bus_id[i]);
    lower[i] = '\0';
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", lower);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int node = -1;
    if (fscanf(f, "%d", &node) != 1) node = -1;
    fclose(f);
    return node;
}

int dt_cuda_device_info(int dev, struct dt_cuda_device *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        snprintf(why, n, "cudaGetDeviceProperties(%d) failed: %s", dev, cudaGetErrorString(e));
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->mem_bytes = p.totalGlobalMem;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    e = cudaDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id, dev);
    if (e != cudaSuccess) {
        snprintf(why, n, "cudaDeviceGetPCIBusId(%d) failed: %s", dev, cudaGetErrorString(e));
        return -1;
    }
    out->numa_node = numa_node_of(out->pci_bus_id);
    return 0;
}
