dnl CUDA toolkit with cuBLAS(Lt) and NCCL: the GPU backend. Compiled and linked
dnl wherever the toolkit is; whether a GPU exists is a run-time question.
AC_DEFUN([DT_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit with cuBLAS and NCCL (default: /usr/local/cuda when present)])],
              [], [with_cuda=check])
  dt_have_cuda=no
  dt_cuda_summary=
  CUDA_CPPFLAGS=
  CUDA_LIBS=
  NVCC=
  AS_IF([test "x$with_cuda" != "xno"], [
    AS_CASE(["$with_cuda"], [yes|check], [dt_cuda_dir=/usr/local/cuda], [dt_cuda_dir=$with_cuda])
    AC_PATH_PROG([NVCC], [nvcc], [], [$dt_cuda_dir/bin])
    CUDA_CPPFLAGS="-isystem $dt_cuda_dir/include"
    CUDA_LIBS="-L$dt_cuda_dir/lib64 -Wl,-rpath,$dt_cuda_dir/lib64 -lnccl -lcublasLt -lcublas -lcudart"
    dt_save_CPPFLAGS=$CPPFLAGS
    dt_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
    LIBS="$CUDA_LIBS $LIBS"
    AC_MSG_CHECKING([for CUDA runtime, cuBLASLt and NCCL in $dt_cuda_dir])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>
#include <cublasLt.h>
#include <nccl.h>]], [[int n = 0, v = 0; cudaGetDeviceCount(&n); ncclGetVersion(&v); return (int)cublasLtGetVersion() + n + v == 0;]])],
                   [dt_have_cuda=yes], [dt_have_cuda=no])
    AC_MSG_RESULT([$dt_have_cuda])
    CPPFLAGS=$dt_save_CPPFLAGS
    LIBS=$dt_save_LIBS
    AS_IF([test "x$dt_have_cuda" = "xyes" && test -z "$NVCC"], [dt_have_cuda=no])
    AS_IF([test "x$dt_have_cuda" = "xyes"], [
      AC_DEFINE([HAVE_CUDA], [1], [Define if the CUDA toolkit, cuBLASLt and NCCL are available])
      dt_cuda_summary="($dt_cuda_dir; nvcc `$NVCC --version | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`)"
    ], [
      CUDA_CPPFLAGS=
      CUDA_LIBS=
      AS_IF([test "x$with_cuda" != "xcheck"],
            [AC_MSG_ERROR([--with-cuda was given but nvcc, cuda_runtime.h, cublasLt.h or nccl.h (with their libraries) were not found under $dt_cuda_dir])],
            [AC_MSG_WARN([CUDA toolkit not found: building the CPU backend only])])
    ])
  ])
  dnl the GPU architectures the kernels are built for: Ampere (A100) and Hopper (H100) by default
  AC_ARG_WITH([cuda-arch], [AS_HELP_STRING([--with-cuda-arch=LIST], [GPU architectures to build for, e.g. 80,90 (the default)])],
              [], [with_cuda_arch=80,90])
  CUDA_ARCH_FLAGS=
  for a in `echo "$with_cuda_arch" | tr ',;' '  '`; do
    AS_CASE(["$a"], [[[0-9]]*], [], [AC_MSG_ERROR([--with-cuda-arch: '$a' is not a compute capability such as 80 or 90])])
    CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_$a,code=sm_$a"
  done
  AS_IF([test "x$enable_werror" = "xyes"], [NVCC_WERROR="--Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror"],
        [NVCC_WERROR=])
  AC_SUBST([CUDA_ARCH_FLAGS])
  AC_SUBST([NVCC_WERROR])
  AC_SUBST([NVCC])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
  AM_CONDITIONAL([WITH_CUDA], [test "x$dt_have_cuda" = "xyes"])
])
