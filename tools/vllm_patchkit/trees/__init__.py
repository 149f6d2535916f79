"""The trees layer: release trees from the package index, their runtimes, versions,
and the child processes that run a tree's code.

Imports only the floor (errors, paths, gitcmd, judgement).
"""
