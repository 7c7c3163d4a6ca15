/* librocprof-sys: a tiny host-only stand-in for the rocprofiler-systems runtime library. */
#include "rocprof_sys.h"

int rocprof_sys_version(void) { return ROCPROF_SYS_VERSION; }

const char* rocprof_sys_project(void) { return "rocprofiler-systems"; }
