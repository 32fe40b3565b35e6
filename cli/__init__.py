"""The ``coe`` command line."""
