"""Overlay attention: backends (wired by the plugin) and their kernels."""
