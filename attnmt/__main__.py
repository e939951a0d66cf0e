"""`python -m attnmt` is the `attnmt` command."""

from attnmt.cli import run

run()
