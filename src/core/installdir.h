/*
 * installdir.h - where dtrun's own files are: in the build tree for a dtrun run from it (tests,
 * a developer), else where `make install` put them.
 */
#ifndef DT_INSTALLDIR_H
#define DT_INSTALLDIR_H

#include <stdbool.h>

/* Whether this program runs from the build tree it was built in (DT_BUILDDIR). */
bool dt_from_build_tree(void);

#endif
