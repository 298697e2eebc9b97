dnl MPI (Open MPI): the CPU collective backend and the local launcher's mpirun.
AC_DEFUN([DT_CHECK_MPI], [
  DT_CHECK_LIB([mpi], [ompi-c], [mpi.h], [mpi], [MPI_Init_thread], [no], [MPI prefix (CPU collectives)])
  AC_PATH_PROG([MPIRUN], [mpirun], [], [$PATH:$with_mpi/bin])
  AC_DEFINE_UNQUOTED([DT_MPIRUN], ["$MPIRUN"], [mpirun found by configure])
])
