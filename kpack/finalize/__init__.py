"""``kpack finalize-wheel``: make a wheel built against ROCm a member of the rocm-sdk set.

``kpack finalize-wheel WHEEL… [--input-dir DIR] --output-dir DIR --rocm-version V
--rocm-set SET [--expected-gpu-target T]… [--max-wheel-size SIZE]``:

- the version gets TheRock's ROCm local suffix (``1.2.3+rocm7.10.0``;
  :mod:`kpack.finalize._version`), the file name and ``.dist-info``/``.data`` follow, RECORD
  is written anew;
- ``Requires-Dist: rocm-sdk-core == V`` (and the libraries wheel when a file links one of
  its libraries), replacing any looser pin (:mod:`kpack.finalize._metadata`);
- Linux: vendored copies of the set's libraries are removed and the NEEDED names that
  pointed at them restored; every ELF file that needs a library of the set finds it in the
  set's directory relative to where the file installs (:mod:`kpack.finalize._plan`), as the
  set (``SET``, its wheels) lays them out;
- Windows: the metadata work; the wheel's DLLs find the set's DLLs as
  ``rocm_sdk.initialize_process`` preloads them;
- the embedded GPU targets checked against ``--expected-gpu-target``
  (:mod:`kpack.finalize._targets`);
- every finalized wheel checked against ``--max-wheel-size`` before any is published
  (:mod:`kpack.common.budget`); outputs are published under the output-directory rule
  (:mod:`kpack.common.outputs`) and are byte-reproducible (``SOURCE_DATE_EPOCH``).

``split-wheel --finalize`` runs the same finalize on its input first
(:func:`finalized_tree`), so the host wheel and the device wheels carry one version and the
same pins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpack.finalize._cli import add_arguments, add_budget_argument, add_set_arguments

if TYPE_CHECKING:
    from kpack.finalize._run import (
        FinalizeOptions,
        FinalizeRow,
        finalize_wheels,
        finalized_tree,
        options_from,
        run,
    )
else:  # the command's modules are imported when it runs (kpack builds its parser from _cli)
    from kpack.common.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            n: "_run"
            for n in (
                "FinalizeOptions",
                "FinalizeRow",
                "finalize_wheels",
                "finalized_tree",
                "options_from",
                "run",
            )
        },
    )

__all__ = [
    "FinalizeOptions",
    "FinalizeRow",
    "add_arguments",
    "add_budget_argument",
    "add_set_arguments",
    "finalize_wheels",
    "finalized_tree",
    "options_from",
    "run",
]
