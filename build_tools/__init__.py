"""Build the rocm / rocm-sdk-* Python distributions from a TheRock artifact tree.

The builder's data path, top to bottom (:mod:`build_tools.build_python_packages`, its
command line, runs it in this order):

- inputs: ``options`` (what the command line asked for), ``targets`` (the GPU family
  table), ``manifests`` (the package declarations);
- scan: ``artifacts``, the tree read once into a frozen catalog;
- plan: ``plan/``, what is built, from which files, in which layout, with which RPATHs and
  metadata, and the checks a plan passes (``kpack_split`` plans the split of fat artifacts
  into the catalog); ``render`` and ``launcher`` make the bytes it holds, ``payload`` says
  what each member will contain;
- apply: ``build``, the only writer (``devel`` writes the devel tarball);
- report: ``report``, written beside ``dist/``; ``progress`` is what the CLI shows meanwhile.

``assemble_shards`` (over ``shards/``) merges target-sharded builds; ``pep503/`` writes
the package index.
"""
