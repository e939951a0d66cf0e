"""`python -m attnmt` is the `attnmt` command."""

import sys

from attnmt.cli import main

sys.exit(main())
