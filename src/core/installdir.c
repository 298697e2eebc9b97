/* installdir.c - see installdir.h. */
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include "core/installdir.h"

bool dt_from_build_tree(void)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    size_t bl = strlen(DT_BUILDDIR);
    if (k <= 0) return false;
    exe[k] = '\0';
    return strncmp(exe, DT_BUILDDIR, bl) == 0 && exe[bl] == '/';
}
