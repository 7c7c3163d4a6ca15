"""Application-level tools built on the kpack core (never on :mod:`build_tools`)."""
