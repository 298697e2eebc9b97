dnl DT_ENABLE_WARNINGS: the warning set every file builds with; --enable-werror makes them errors (CI).
AC_DEFUN([DT_ENABLE_WARNINGS], [
  AC_ARG_ENABLE([werror], [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors (CI does)])],
                [], [enable_werror=no])
  DT_CFLAGS="-std=gnu11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wpointer-arith -Wno-unused-parameter -Wno-format-truncation"
  AS_IF([test "x$enable_werror" = "xyes"], [DT_CFLAGS="$DT_CFLAGS -Werror"])
  AC_SUBST([DT_CFLAGS])
])
dnl DT_ENABLE_SANITIZERS: ASan + UBSan build of everything, tests included.
AC_DEFUN([DT_ENABLE_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers], [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
                [], [enable_sanitizers=no])
  AS_IF([test "x$enable_sanitizers" = "xyes"], [
    DT_SAN_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
    DT_LDFLAGS="-fsanitize=address,undefined"
  ])
  dnl apart from DT_CFLAGS: the SPANK plugin is loaded by srun and slurmstepd, which have no ASan runtime
  AC_SUBST([DT_SAN_CFLAGS])
  AC_SUBST([DT_LDFLAGS])
])
dnl DT_ENABLE_FUZZ: the libFuzzer targets of tests/fuzz (clang only), ASan+UBSan. Every file is
dnl instrumented for libFuzzer's coverage (-fsanitize=fuzzer-no-link); only the targets link its main.
dnl Use a build directory of its own: CC=clang ../configure --enable-fuzz ... (scripts/fuzz does).
AC_DEFUN([DT_ENABLE_FUZZ], [
  AC_ARG_ENABLE([fuzz], [AS_HELP_STRING([--enable-fuzz],
                [build the libFuzzer targets of tests/fuzz with ASan+UBSan (needs CC=clang)])],
                [], [enable_fuzz=no])
  DT_FUZZ_LDFLAGS=
  AS_IF([test "x$enable_fuzz" = "xyes"], [
    AC_MSG_CHECKING([whether $CC links libFuzzer targets])
    dt_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -fsanitize=fuzzer,address,undefined"
    AC_LINK_IFELSE([AC_LANG_SOURCE([[#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return data && size > 1 ? 0 : 0; }]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([--enable-fuzz needs clang with libFuzzer and its sanitizers (apt-get install clang libclang-rt-14-dev), as CC=clang])])
    CFLAGS=$dt_save_CFLAGS
    dnl every failing UBSan check ends the run, so the fuzzer counts it as a crash; clang does not
    dnl know GCC's -Wno-format-truncation (DT_CFLAGS) and need not say so for every file
    DT_SAN_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -Wno-unknown-warning-option"
    DT_LDFLAGS="-fsanitize=address,undefined"
    DT_FUZZ_LDFLAGS="-fsanitize=fuzzer"
  ])
  AC_SUBST([DT_FUZZ_LDFLAGS])
  AM_CONDITIONAL([WITH_FUZZ], [test "x$enable_fuzz" = "xyes"])
])
dnl DT_ENABLE_ANALYZER: GCC's static analyzer (-fanalyzer, GCC 12) over the project's own sources
dnl (src/, kernels/, spank/); with --enable-werror its findings fail the build (`make analyze`,
dnl scripts/test; issue #16). The build only has to compile, never to run fast: -fno-openmp drops
dnl the OpenMP pragmas, whose outlined bodies confuse the analyzer (and -Wno-unknown-pragmas the
dnl warnings that they are now unknown); the omp_* calls still link to libgomp.
dnl Use a build directory of its own: ../configure --enable-werror --enable-analyzer (build-analyzer/).
AC_DEFUN([DT_ENABLE_ANALYZER], [
  AC_ARG_ENABLE([analyzer], [AS_HELP_STRING([--enable-analyzer],
                [compile with GCC's static analyzer, -fanalyzer (GCC 12 or newer)])],
                [], [enable_analyzer=no])
  DT_ANALYZER_CFLAGS=
  AS_IF([test "x$enable_analyzer" = "xyes"], [
    AC_MSG_CHECKING([whether $CC accepts -fanalyzer])
    dt_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -fanalyzer -Werror"
    AC_COMPILE_IFELSE([AC_LANG_SOURCE([[int dt_analyzer_probe(void);
int dt_analyzer_probe(void) { return 0; }]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([--enable-analyzer needs GCC 12 or newer (-fanalyzer)])])
    CFLAGS=$dt_save_CFLAGS
    DT_ANALYZER_CFLAGS="-fanalyzer -fno-openmp -Wno-unknown-pragmas"
  ])
  dnl apart from DT_CFLAGS: it goes after OPENMP_CFLAGS, so that -fno-openmp wins over -fopenmp
  AC_SUBST([DT_ANALYZER_CFLAGS])
])
