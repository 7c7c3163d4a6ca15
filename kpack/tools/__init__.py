"""Application-level tools built on the kpack core (they may use :mod:`build_tools`)."""
