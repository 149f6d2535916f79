"""The git layer: the patch series and the operations on a checkout (apply, carry,
checkout, guard, rebase, refresh, upstream) and the series' invariants.

Imports the floor and ``trees``; never ``judge``, ``present`` or the commands.
"""
