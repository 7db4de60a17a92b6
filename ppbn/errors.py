"""Exceptions shared by every layer, and the one way text from elsewhere enters a message.

``UserError`` is anything the user can fix: the CLI prints it as one line naming the
file, row, column or message at fault, and exits with code 2. Text that came from a peer,
a daemon or a file goes into a message or a log line through ``printable``.
"""


def printable(text: object, limit: int = 80) -> str:
    """``text`` safe for one line of a message or log: control characters replaced, at
    most ``limit`` characters (and "..." when cut)."""
    text = str(text)
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in text[:limit])
    return cleaned + ("..." if len(text) > limit else "")


class UserError(Exception):
    """An error the user can act on; printed as one line by the CLI, exit code 2."""


class DataError(UserError):
    """Bad schema or data file; the message names the file, row and column at fault."""
