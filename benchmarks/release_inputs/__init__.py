"""Release-size benchmark inputs made from real code objects (issue 31, item 1).

:mod:`.targets` every target TheRock builds and how a code object is relabelled to one;
:mod:`.pool` the real code objects (two cached PyPI ROCm 7 wheels built by TheRock's
toolchain); :mod:`.fatlib` fat shared libraries made of them; :mod:`.plan` which libraries
a tree of a given size holds; :mod:`.tree` the TheRock-layout artifact tree and its
provenance file; :mod:`.wheel` the torch-sized fat wheel. ``benchmarks/make_release_inputs.py``
is the command line.
"""
