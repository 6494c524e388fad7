/* pl_version.c: the git revision of this build (a header cmake/git_rev.cmake rewrites on every build). */
#include "pl_common.h"
#include "pl_git_rev.h"

const char *pl_git_rev(void) { return PL_GIT_REV_TEXT; }
