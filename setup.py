"""The optional C record decoder (src/eoslog/records/_speedups.c), built when a compiler is
there, as aiokafka builds its extensions; without one eoslog runs its pure-Python decoder
(``optional=True``: a failed build is a warning). Everything else about the package is in
pyproject.toml. In a checkout: ``python scripts/build_speedups.py`` (scripts/setup.sh runs it)."""

from setuptools import Extension, setup

SPEEDUPS = Extension("eoslog.records._speedups", ["src/eoslog/records/_speedups.c"], optional=True)

if __name__ == "__main__":  # also how setuptools' build backend runs this file
    setup(ext_modules=[SPEEDUPS])
