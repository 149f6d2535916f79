"""The judge layer: what decides a verdict on a tree (verify, the regression suite,
the audit, mutation testing, the memory checker, the matrix, the doctor).

Imports the floor, ``trees`` and ``git``; never ``present`` or the commands.
"""
