/* One source for bin/rocprof-sys-{run,sample,instrument}; ROCPROF_SYS_TOOL names the build. */
#include <stdio.h>
#include <string.h>

#include "rocprof_sys.h"

#ifndef ROCPROF_SYS_TOOL
#error "define ROCPROF_SYS_TOOL as the program name"
#endif

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("%s\n", ROCPROF_SYS_TOOL);
        return 0;
    }
    printf("%s: %s %d\n", ROCPROF_SYS_TOOL, rocprof_sys_project(), rocprof_sys_version());
    return 0;
}
