"""#51585's mutants: wrong versions of ROCM_ATTN's capture method.

Its scenarios are the suite's core ones (:mod:`...scenarios`, with
:mod:`...capture_loop` and :mod:`...victims`), judged by check functions of
their own in :mod:`...verdict`, so this module has no ``FACTS`` and no
``RUNS``. It names only the module that makes its mutants (torch-free, but
named rather than imported, as every fix's is).
"""

from __future__ import annotations

MUTATION = f"{__name__}.mutants"
"""The module of its mutation target and mutants (``TARGETS``, ``FILE_MUTANTS``)."""
