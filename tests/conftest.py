"""Suite-wide test settings.

Hypothesis' per-example deadline (200 ms by default) measures the machine, not the code: on a loaded CI runner
or beside other work, a first example that pays an import or a cold cache exceeds it and the test fails as
"Unreliable test timings" (tests/system/test_files.py did, 256 ms once, 0.6 ms on the rerun). Speed is measured
in `make bench`; here the deadline is off for every property test. `HYPOTHESIS_PROFILE=dev` keeps Hypothesis'
defaults for anyone hunting a slow example.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))
