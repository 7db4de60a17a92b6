"""Exceptions shared by every layer.

``UserError`` is anything the user can fix: the CLI prints it as one line naming the
file, row, column or message at fault, and exits with code 2.
"""


class UserError(Exception):
    """An error the user can act on; printed as one line by the CLI, exit code 2."""


class DataError(UserError):
    """Bad schema or data file; the message names the file, row and column at fault."""
