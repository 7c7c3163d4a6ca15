/* libprofiler-hub: a tiny host-only library of the sample profiler artifact. */
int profiler_hub_version(void) { return 100; }
