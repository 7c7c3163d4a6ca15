"""Native files of a ROCm Python package (a regular package, not a namespace)."""
