dnl PMIx: rank discovery and the key-value bootstrap under srun --mpi=pmix and mpirun.
dnl Debian's libpmix-dev keeps headers and library under /usr/lib/<triplet>/pmix2;
dnl its pmix.pc carries those paths and an rpath.
AC_DEFUN([DT_CHECK_PMIX], [DT_CHECK_LIB([pmix], [pmix], [pmix.h], [pmix], [PMIx_Init], [no],
  [PMIx prefix (e.g. /usr/lib/x86_64-linux-gnu/pmix2)])])
