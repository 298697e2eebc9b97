/* peak.c - see peak.h. */
#include <string.h>
#include "train/peak.h"

/* First match wins, so the specific names come before the general ones (an "H100 PCIe" before
 * every other H100). */
static const struct {
    const char *has[2]; /* both substrings in the name (the second may be NULL) */
    double bf16, fp32;
} table[] = {
    {{"H100", "PCIe"}, 756, 51.2},
    {{"H100", "NVL"}, 835, 60},
    {{"H100", NULL}, 989.4, 66.9}, /* SXM5, "NVIDIA H100 80GB HBM3" */
    {{"H200", "NVL"}, 835, 60},
    {{"H200", NULL}, 989.4, 66.9}, /* SXM, and GH200's Hopper */
    {{"H800", "PCIe"}, 756, 51.2},
    {{"H800", NULL}, 989.4, 66.9},
    {{"A100", NULL}, 312, 19.5},
    {{"A800", NULL}, 312, 19.5},
    {{"L40S", NULL}, 362.1, 91.6},
    {{"A10G", NULL}, 70, 31.2},
    {{"RTX 4090", NULL}, 165.2, 82.6},
    {{"RTX 3090", NULL}, 71, 35.6},
};

double dt_peak_tflops(const char *name, enum dt_dtype compute)
{
    if (!name) return 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(name, table[i].has[0]) && (!table[i].has[1] || strstr(name, table[i].has[1])))
            return compute == DT_F32 ? table[i].fp32 : table[i].bf16;
    return 0;
}
