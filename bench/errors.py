"""Errors a user can fix: the CLI prints them on one line, with no traceback."""


class BenchError(Exception):
    """Bad input or a state the user must change (exit status 2 for usage)."""

    exit_code = 2


def brief(error: Exception, most: int = 160) -> str:
    """An error's message on one line, cut after `most` characters (a parser's or a network
    library's message can run to hundreds, nesting every cause)."""
    text = " ".join(str(error).split())
    return text[:most] + "..." if len(text) > most else text
