"""Makes this directory a package for pytest, so the package-scoped Kafka broker (conftest.py)
stops when its last test ends; in a plain directory pytest keeps a package-scoped fixture until
the end of the whole run."""
