"""What a user downloads for one GPU against every GPU (issue 32, item 6).

:mod:`.pip` pip as the oracle: a package set, what pip would download from its index for a
requirement on a machine with a given GPU, checked against ``dist/``; :mod:`.measure` one row
per GPU (kpack one GPU, every GPU, the legacy family) and the builder's report held to pip;
:mod:`.inputs` package sets built from artifact trees or the sample tree; :mod:`.render` the
table. ``benchmarks/bench_per_gpu.py`` is the command line.
"""
