"""The project's sample artifact tree: real Debian ROCm binaries plus hipcc-built fat
binaries, laid out as TheRock lays out an artifact tree. For the sample job, tests and
benchmarks; not part of the installed packages."""
