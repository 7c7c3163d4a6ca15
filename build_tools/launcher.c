/* Launcher stub that stands in for a symlink to an executable inside a wheel.
 *
 * Wheels cannot hold symlinks. This program finds its own directory, appends the
 * relative path that the original link held, resolves it with realpath(3) and
 * execv(2)s the result: argv (including argv[0]) and the environment pass through
 * unchanged, and so does the exit status.
 *
 * The builder compiles this once per run and writes each link's text into
 * `launcher_target` after the marker, so every stub comes from one compilation.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARKER "@@ROCM-SDK-LAUNCHER-TARGET@@"

/* Not const, so the compiler cannot fold the contents: the builder patches them. */
__attribute__((used)) char launcher_target[4096] = MARKER;

static int own_path(char *out, size_t size) {
  ssize_t n = readlink("/proc/self/exe", out, size - 1);
  if (n > 0) {
    out[n] = '\0';
    return 0;
  }
  Dl_info info;
  if (dladdr((void *)&own_path, &info) && info.dli_fname &&
      realpath(info.dli_fname, out) != NULL) {
    return 0;
  }
  return -1;
}

int main(int argc, char **argv) {
  (void)argc;
  const char *relative = launcher_target + sizeof(MARKER) - 1;
  char self[PATH_MAX];
  if (own_path(self, sizeof self) != 0) {
    fprintf(stderr, "rocm-sdk launcher: cannot find own path: %s\n", strerror(errno));
    return 127;
  }
  char *slash = strrchr(self, '/');
  if (slash != NULL) *slash = '\0';
  char joined[2 * PATH_MAX];
  snprintf(joined, sizeof joined, "%s/%s", self, relative);
  char target[PATH_MAX];
  if (realpath(joined, target) == NULL) {
    fprintf(stderr, "rocm-sdk launcher: cannot resolve %s: %s\n", joined, strerror(errno));
    return 127;
  }
  execv(target, argv);
  fprintf(stderr, "rocm-sdk launcher: cannot execute %s: %s\n", target, strerror(errno));
  return 127;
}
