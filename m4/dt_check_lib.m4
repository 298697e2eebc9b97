dnl DT_CHECK_LIB(NAME, PKGCONFIG, HEADER, LIB, FUNCTION, REQUIRED, [HELP], [PROLOGUE])
dnl
dnl One shape for every dependency: --with-NAME[=DIR] / --without-NAME.
dnl   default (check): use it when found, say so in the summary when not;
dnl   yes or DIR: asked for, so a miss is an error; no: off (an error when REQUIRED is yes).
dnl Flags come from DIR, else pkg-config PKGCONFIG, else the default paths.
dnl Defines HAVE_<NAME>, substitutes <NAME>_CPPFLAGS / <NAME>_LIBS, sets
dnl AM_CONDITIONAL WITH_<NAME> and the shell variable dt_have_<name> (yes/no).
AC_DEFUN([DT_CHECK_LIB], [
  m4_pushdef([UP], m4_toupper([$1]))
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$7])],
              [], [with_$1=check])
  dt_have_$1=no
  UP[]_CPPFLAGS=
  UP[]_LIBS=
  AS_IF([test "x$with_$1" = "xno"], [
    AS_IF([test "x$6" = "xyes"], [AC_MSG_ERROR([$1 is required: do not pass --without-$1])])
  ], [
    AS_CASE(["$with_$1"],
      [yes|check], [
        AS_IF([test -n "$2" && $PKG_CONFIG --exists $2 2>/dev/null], [
          UP[]_CPPFLAGS=`$PKG_CONFIG --cflags $2`
          UP[]_LIBS=`$PKG_CONFIG --libs $2`
        ], [UP[]_LIBS="-l$4"])
      ],
      [
        AS_IF([test ! -f "$with_$1/include/$3"],
              [AC_MSG_ERROR([--with-$1=$with_$1: $with_$1/include/$3 does not exist; name the prefix that holds include/$3])])
        UP[]_CPPFLAGS="-I$with_$1/include"
        UP[]_LIBS="-L$with_$1/lib -Wl,-rpath,$with_$1/lib -l$4"
      ])
    dt_save_CPPFLAGS=$CPPFLAGS
    dt_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $UP[]_CPPFLAGS"
    LIBS="$UP[]_LIBS $LIBS"
    AC_MSG_CHECKING([for $1 ($3, $5)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([$8
#include <$3>], [[void *p = (void *)&$5; return p == 0;]])],
                   [dt_have_$1=yes], [dt_have_$1=no])
    AC_MSG_RESULT([$dt_have_$1])
    CPPFLAGS=$dt_save_CPPFLAGS
    LIBS=$dt_save_LIBS
    AS_IF([test "x$dt_have_$1" = "xno"], [
      UP[]_CPPFLAGS=
      UP[]_LIBS=
      AS_IF([test "x$6" = "xyes"],
            [AC_MSG_ERROR([$1 is required but $3 / lib$4 was not found; run scripts/setup-deps or pass --with-$1=DIR])],
            [test "x$with_$1" != "xcheck"],
            [AC_MSG_ERROR([--with-$1 was given but $3 / lib$4 was not found; install it (scripts/setup-deps) or pass --with-$1=DIR])],
            [AC_MSG_WARN([$1 not found: building without it])])
    ], [AC_DEFINE([HAVE_]UP, [1], [Define if $1 is available])])
  ])
  AC_SUBST(UP[_CPPFLAGS])
  AC_SUBST(UP[_LIBS])
  AM_CONDITIONAL([WITH_]UP, [test "x$dt_have_$1" = "xyes"])
  m4_popdef([UP])
])
