"""Makes tests/conformance a package for pytest, so the package-scoped ``brokers`` (conftest.py)
stop when its last test ends; in a plain directory pytest keeps a package-scoped fixture until
the end of the whole run."""
