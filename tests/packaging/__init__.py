"""Tests of what users install and start: the two wheels, the CLI start-up."""
