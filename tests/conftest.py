"""Suite-wide settings: the planner's cache goes to a temporary directory (tests never write to the user's
cache), and planning is off (the documented static defaults), so the suite's timing does not depend on
machine load and no test pays for timing variants. ``tests/test_plan.py`` switches planning on itself."""

import os
import tempfile

os.environ.setdefault("HEMX_CACHE_DIR", tempfile.mkdtemp(prefix="hemx-test-cache-"))
os.environ["HEMX_PLAN"] = "off"
