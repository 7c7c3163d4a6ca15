"""rocm-kpack's command-line tools, each a thin entry over :mod:`kpack`."""
