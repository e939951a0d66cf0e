"""The `attnmt` command: parses arguments and calls library functions, nothing more.

Each module here adds its commands to the parser (`register(sub)`), each command a `cmd_NAME(args)`
that calls the library: training.py (demo, train, prepare, study, average, data), translating.py
(translate, evaluate, plot-attention), around.py (align, serve, animate); common.py holds the
options several share. Every user-facing problem (a missing file, bad UTF-8, a wrong config key...)
is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import signal
import sys
import typing

from attnmt.cli import aligning, around, training, translating
from attnmt.cli.common import ALIGN_METHODS, SYMMETRIZATIONS, check_numbers
from attnmt.errors import Stopped, Terminated, UserError
from attnmt.runtime.process import ends_without_final_collection

__all__ = ["ALIGN_METHODS", "SYMMETRIZATIONS", "build_parser", "main", "run"]

COMMAND_MODULES = (training, translating, around, aligning)  # in the order of `attnmt --help`


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line that points to --help instead of the whole usage."""

    def error(self, message: str) -> typing.NoReturn:
        command = self.prog.partition(" ")[2]  # "attnmt translate": "translate"; "" for attnmt itself
        self.exit(2, f"attnmt: error: {command + ': ' if command else ''}{message}; see {self.prog} --help\n")


class _OneCommand:
    """The subparsers as the modules' ``register(sub)`` see them when one command is to be parsed: that command's
    parser is built, every other is a :class:`_Unbuilt` (argparse takes about 7 ms to build all 17)."""

    def __init__(self, sub, command: str) -> None:
        self.sub, self.command = sub, command

    def add_parser(self, name: str, **kwargs):
        return self.sub.add_parser(name, **kwargs) if name == self.command else _Unbuilt()


class _Unbuilt:
    """A command's parser that is not built: whatever its module adds to it is accepted and dropped."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `attnmt` parser with every command, or, given the name of one, with that command only (what `main`
    parses a command line with); a name that is no command gets them all, so that the error lists them."""
    from attnmt import __version__

    parser = Parser(prog="attnmt", description="Neural machine translation with attention.")
    parser.add_argument("--version", action="version", version=f"attnmt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.register(sub if command is None else _OneCommand(sub, command))
    if command is not None and command not in sub.choices:
        return build_parser()
    return parser


def _terminate(signum, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_raises():
    """SIGTERM raises `Terminated` where the command is (as Ctrl-C raises KeyboardInterrupt): outputs are cleaned
    up and the command exits 143 at once; a training run's loop turns it into a stop after the step
    (attnmt.train.events.graceful_stop). Outside the main thread signals stay as they are."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    try:
        with sigterm_raises():
            check_numbers(parser, args)
            args.func(args)
    except UserError as e:
        print(f"attnmt: error: {e}", file=sys.stderr)
        return 2
    except Stopped as e:
        return e.code
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"attnmt: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # a disk that fills up while a command writes (checkpoints say more: attnmt.folder.checkpoint)
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        where = f" ({e.filename})" if e.filename else ""
        print(f"attnmt: error: {e.strerror}{where} while writing; free some space (or choose a folder that can be "
              "written) and run the command again", file=sys.stderr)
        return 2
    return 0


def run() -> typing.NoReturn:
    """The `attnmt` command's process (the console script and `python -m attnmt`): `main` with the arguments
    it was started with, in a process that ends without the interpreter's last garbage collection
    (attnmt.runtime.process)."""
    ends_without_final_collection()
    sys.exit(main())


if __name__ == "__main__":
    run()
