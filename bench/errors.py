"""Errors a user can fix: the CLI prints them on one line, with no traceback."""


class BenchError(Exception):
    """Bad input or a state the user must change (exit status 2 for usage)."""

    exit_code = 2
