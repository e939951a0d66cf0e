"""python -m attnmt.cli"""

import sys

from attnmt.cli import main

sys.exit(main())
