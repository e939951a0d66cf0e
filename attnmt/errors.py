"""User-facing errors: one clear line (what, where, what to do); the CLI exits with code 2."""


class UserError(Exception):
    """A problem with the user's input, files or configuration, not a bug in attnmt."""
