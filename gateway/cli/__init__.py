"""The ``gateway`` command line."""
