/*
 * version.c - what this binary was built with. Like backend_reg.c, a
 * registration file: the #ifdefs for optional libraries live here only.
 */
#include <curl/curl.h>
#include <string.h>
#include <yaml.h>
#include "dt_build_config.h"
#include "kernels/backend.h"
#include "version.h"
#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_PMIX
#include <pmix.h>
#endif
#ifdef HAVE_CRYPTO
#include <openssl/crypto.h>
#endif

void dt_version_print(FILE *out)
{
    fprintf(out, "dtrun %s\n", PACKAGE_VERSION);
    const char *opts = DT_BUILD_OPTIONS;
    while (*opts == ' ') opts++;
    fprintf(out, "configured with: %s\n", *opts ? opts : "(defaults)");
    char kernels[512];
    dt_backend_describe(kernels, sizeof kernels);
    fprintf(out, "kernels: %s\n", kernels);
    dt_backend_describe_cuda(kernels, sizeof kernels);
    fprintf(out, "cuda: %s\n", kernels);
    fprintf(out, "comm:");
#ifdef HAVE_MPI
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    mpi[strcspn(mpi, ",\n")] = '\0';
    fprintf(out, " mpi (%s)", mpi);
#endif
#ifdef HAVE_CUDA
    fprintf(out, " nccl (in the CUDA module)");
#endif
#if !defined(HAVE_MPI) && !defined(HAVE_CUDA)
    fprintf(out, " none (single process only)");
#endif
    fprintf(out, "\nbootstrap:");
#ifdef HAVE_PMIX
    fprintf(out, " pmix (%s)", PMIx_Get_version());
#endif
    fprintf(out, " slurm-env single\n");
#ifdef HAVE_SLURM
    fprintf(out, "spank: spank_dtrun.so, installed in %s (spank/README.md)\n", DT_SLURM_PLUGINDIR);
#endif
#ifdef HAVE_CRYPTO
    fprintf(out, "events: webhook, HMAC-SHA256 signatures (%s)\n", OpenSSL_version(OPENSSL_VERSION));
#else
    fprintf(out, "events: webhook, unsigned only (built without libcrypto)\n");
#endif
    fprintf(out, "libraries: libyaml %s, %s\n", yaml_get_version_string(), curl_version());
}
