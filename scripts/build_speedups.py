"""Build the optional C record decoder in place (src/eoslog/records/_speedups.*.so), for a
checkout used through an editable install. Exit status 0 also when no compiler is there:
eoslog then runs its pure-Python decoder, and this says so.

    python scripts/build_speedups.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Distribution

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from setup import SPEEDUPS  # the one definition of the extension

    dist = Distribution({"name": "eoslog-speedups", "ext_modules": [SPEEDUPS], "package_dir": {"": "src"}})
    dist.verbose = 0
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = True
    cmd.build_temp = str(ROOT / "build" / "speedups")
    dist.run_command("build_ext")
    built = sorted((ROOT / "src" / "eoslog" / "records").glob("_speedups*.so"))
    print(f"C record decoder: {built[0].name}" if built else
          "C record decoder not built (no compiler?): eoslog uses the pure-Python decoder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
