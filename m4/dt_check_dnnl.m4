dnl oneDNN (Debian libdnnl-dev): the CPU matmul backend.
AC_DEFUN([DT_CHECK_DNNL], [DT_CHECK_LIB([dnnl], [], [dnnl.h], [dnnl], [dnnl_sgemm], [no],
  [oneDNN prefix (CPU matmuls)])])
