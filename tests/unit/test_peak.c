/* test_peak.c - the peak rates MFU is taken against (train/peak.h), by the names CUDA gives. */
#include "dt_test.h"
#include "train/peak.h"

static void by_name(void **state)
{
    static const struct {
        const char *name;
        enum dt_dtype t;
        double tflops;
    } cases[] = {
        {"NVIDIA H100 80GB HBM3", DT_BF16, 989.4}, /* SXM5 */
        {"NVIDIA H100 80GB HBM3", DT_F32, 66.9},   /* no TF32: the plain fp32 rate */
        {"NVIDIA H100 PCIe", DT_BF16, 756},        /* before the general H100 */
        {"NVIDIA H100 NVL", DT_F16, 835},
        {"NVIDIA H200", DT_BF16, 989.4},
        {"NVIDIA H200 NVL", DT_BF16, 835}, /* before the general H200 */
        {"NVIDIA GH200 480GB", DT_BF16, 989.4},
        {"NVIDIA H800 PCIe", DT_F32, 51.2},
        {"NVIDIA A100-SXM4-80GB", DT_F16, 312},
        {"NVIDIA A100-SXM4-80GB", DT_F32, 19.5},
        {"NVIDIA L40S", DT_BF16, 362.1},
        {"NVIDIA GeForce RTX 4090", DT_BF16, 165.2},
        {"Tesla V100-SXM2-16GB", DT_BF16, 0}, /* not in the table: mfu null unless events.peak_tflops */
        {"", DT_BF16, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (dt_peak_tflops(cases[i].name, cases[i].t) != cases[i].tflops)
            fail_msg("%s in %s: %g TFLOP/s, expected %g", cases[i].name, dt_dtype_str(cases[i].t),
                     dt_peak_tflops(cases[i].name, cases[i].t), cases[i].tflops);
    assert_true(dt_peak_tflops(NULL, DT_BF16) == 0);
}

DT_TESTS(T(by_name))
