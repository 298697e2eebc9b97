dnl Slurm SPANK headers: the dtrun SPANK plugin. Nothing to link: slurmstepd,
dnl srun and sbatch provide the spank_* symbols when they load the plugin.
dnl The plugin installs into Slurm's PluginDir: --with-slurm-plugindir, else the first of
dnl Slurm's usual places that exists (Debian's slurm-wlm, RPMs' lib64/slurm), else $libdir/slurm.
AC_DEFUN([DT_CHECK_SLURM], [
  AC_ARG_WITH([slurm], [AS_HELP_STRING([--with-slurm@<:@=DIR@:>@], [Slurm prefix (SPANK plugin headers)])],
              [], [with_slurm=check])
  dt_have_slurm=no
  SLURM_CPPFLAGS=
  AS_IF([test "x$with_slurm" != "xno"], [
    AS_CASE(["$with_slurm"], [yes|check], [], [SLURM_CPPFLAGS="-I$with_slurm/include"])
    dt_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $SLURM_CPPFLAGS"
    AC_CHECK_HEADER([slurm/spank.h], [dt_have_slurm=yes], [], [#include <stdint.h>])
    CPPFLAGS=$dt_save_CPPFLAGS
    AS_IF([test "x$dt_have_slurm" = "xyes"], [AC_DEFINE([HAVE_SLURM], [1], [Define if Slurm SPANK headers are available])],
          [test "x$with_slurm" != "xcheck"], [AC_MSG_ERROR([--with-slurm was given but slurm/spank.h was not found; install libslurm-dev])],
          [AC_MSG_WARN([slurm/spank.h not found: building without the SPANK plugin])])
  ])
  AC_ARG_WITH([slurm-plugindir], [AS_HELP_STRING([--with-slurm-plugindir=DIR],
              [where Slurm loads plugins from (its PluginDir); spank_dtrun.so goes there])],
              [slurmplugindir=$withval], [slurmplugindir=])
  AS_IF([test -z "$slurmplugindir"], [
    for d in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/aarch64-linux-gnu/slurm-wlm /usr/lib64/slurm /usr/lib/slurm; do
      AS_IF([test -d "$d"], [slurmplugindir=$d; break])
    done
    AS_IF([test -z "$slurmplugindir"], [slurmplugindir='${libdir}/slurm'])
  ])
  AC_SUBST([slurmplugindir])
  AC_SUBST([SLURM_CPPFLAGS])
  AM_CONDITIONAL([WITH_SLURM], [test "x$dt_have_slurm" = "xyes"])
])
