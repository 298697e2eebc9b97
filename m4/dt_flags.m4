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
