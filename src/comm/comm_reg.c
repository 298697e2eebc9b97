/* comm_reg.c - which CPU communication backend is compiled in; the one #ifdef HAVE_MPI of comm/. */
#include "dt_build_config.h"
#include "comm/comm.h"

#ifdef HAVE_MPI
extern const struct dt_comm_backend dt_comm_mpi;
const struct dt_comm_backend *dt_comm_cpu_backend(void) { return &dt_comm_mpi; }
#else
const struct dt_comm_backend *dt_comm_cpu_backend(void) { return NULL; }
#endif
