import sys

from hemx.cli import main

sys.exit(main())
