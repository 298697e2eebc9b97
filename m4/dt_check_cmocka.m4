dnl cmocka: the unit tests (make check).
AC_DEFUN([DT_CHECK_CMOCKA], [DT_CHECK_LIB([cmocka], [cmocka], [cmocka.h], [cmocka], [_cmocka_run_group_tests], [no],
  [cmocka prefix (unit tests)], [[#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>]])])
