"""Generic utilities every layer uses: safe paths, JSON/YAML loaders, temp
dirs, the CLI error boundary and the installed data files."""
