"""The compiled p4reduce program, as a package so that it installs with p4reduce.

p4c's outputs beside this file (written by p4src/compile.py, checked against the sources
by their MANIFEST.json) are this package's data: the controller finds them through
importlib.resources (controlplane.pipeline), in a checkout and in an installed wheel alike.
"""
