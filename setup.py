"""The optional C record decoder (src/eoslog/records/_speedups.c), built when a compiler is
there, as aiokafka builds its extensions; without one eoslog runs its pure-Python decoder
(``optional=True``: a failed build is a warning). Everything else about the package is in
pyproject.toml. ``pip install`` builds it (``-e`` too, in place); in a checkout already
installed, or after a change to the C source: ``python scripts/build_speedups.py`` (scripts/setup.sh
runs it every time)."""

from setuptools import Extension, setup

SPEEDUPS = Extension("eoslog.records._speedups", ["src/eoslog/records/_speedups.c"], optional=True)

if __name__ == "__main__":  # also how setuptools' build backend runs this file
    setup(ext_modules=[SPEEDUPS])
