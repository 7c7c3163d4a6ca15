/* API of the tiny sample librocprof-sys. */
#ifndef ROCPROF_SYS_H
#define ROCPROF_SYS_H

#define ROCPROF_SYS_VERSION 10200

int rocprof_sys_version(void);
const char* rocprof_sys_project(void);

#endif /* ROCPROF_SYS_H */
