/*
 * asan_options.c - the sanitizer build's ASan defaults (configure --enable-sanitizers), which
 * ASan reads before main and ASAN_OPTIONS overrides.
 *
 * A rank that mpirun, srun or another PMIx launcher started loads Open MPI's components, which
 * keep allocations until exit and are built without frame pointers: only the slow unwinder
 * follows a leak's stack from them to the libraries tests/lsan.supp names (Open MPI unloads its
 * components in MPI_Finalize, and the fast unwinder's frames in them have no module). Every other
 * process keeps ASan's fast unwinder: a short run under the slow one takes 1.7 times the CPU.
 * Linked into dtrun and into the programs the tests start under mpirun.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <fcntl.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *__asan_default_options(void);

/* ASan asks before its shadow memory exists: nothing here may be instrumented */
#define DT_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined")))

/* Whether ENTRY ("NAME=value") starts with PREFIX. By hand: ASan wraps libc's string functions,
 * and asks for its options before its wrappers can run. */
DT_UNINSTRUMENTED static bool starts_with(const char *entry, const char *prefix)
{
    while (*prefix && *entry == *prefix)
        entry++, prefix++;
    return *prefix == '\0';
}

/* Whether the environment names a launcher's rank. ASan asks before libc has set environ (getenv
 * finds nothing), so the environment is read from /proc with system calls ASan does not wrap (its
 * first 64 KiB: a rank whose variables lie beyond gets the fast unwinder, and its leak reports
 * name no library). */
DT_UNINSTRUMENTED static bool started_as_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE=", "PMIX_RANK=", "SLURM_STEP_ID="};
    static char env[1 << 16];
    long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/environ", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    long n = 0, got;
    while (n < (long)sizeof env - 1 && (got = syscall(SYS_read, fd, env + n, sizeof env - 1 - n)) > 0)
        n += got;
    syscall(SYS_close, fd);
    env[n] = '\0';
    for (long i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (starts_with(env + i, names[k]))
                return true;
        while (i < n && env[i] != '\0')
            i++;
    }
    return false;
}

DT_UNINSTRUMENTED const char *__asan_default_options(void)
{
    return started_as_rank() ? "fast_unwind_on_malloc=0" : "";
}
#endif
