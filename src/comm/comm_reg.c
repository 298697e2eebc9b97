/* comm_reg.c - which communication backends are compiled in; the one #ifdef HAVE_MPI / HAVE_CUDA of comm/. */
#include "dt_build_config.h"
#include "comm/comm.h"

#ifdef HAVE_MPI
extern const struct dt_comm_backend dt_comm_mpi;
const struct dt_comm_backend *dt_comm_cpu_backend(void) { return &dt_comm_mpi; }
#else
const struct dt_comm_backend *dt_comm_cpu_backend(void) { return NULL; }
#endif

#ifdef HAVE_CUDA
extern const struct dt_comm_backend dt_comm_nccl; /* nccl.c; NCCL itself is in the CUDA module */
const struct dt_comm_backend *dt_comm_gpu_backend(void) { return &dt_comm_nccl; }
#else
const struct dt_comm_backend *dt_comm_gpu_backend(void) { return NULL; }
#endif
