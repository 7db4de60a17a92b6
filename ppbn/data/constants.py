"""The data layer's names and defaults that the command line shows in its help, without
pandas or numpy: importing this module loads nothing beyond the standard library
(``ppbn --help`` stays fast). ``data.party_data`` and ``data.schema_tools`` take them from
here."""

from __future__ import annotations

# How an empty cell is read (``--missing``): "error" refuses it; "category" reads it as the
# schema's ``missing_state``, an ordinary declared state; "available-case" codes it
# ``MISSING_CODE`` and every count table involving that variable leaves the record out.
MISSING_RULES = ("error", "category", "available-case")
MISSING_HELP = (
    "how an empty cell is read: error (refuse it; the default), category (the schema's "
    "missing_state becomes an ordinary state), available-case (the record is left out of "
    "exactly the families, child + parents, that contain the variable; secure path only)"
)

# ``ppbn schema infer --missing-markers``: the cells read as "no value" besides the empty
# cell, by default (those found are written into the schema's "missing" list)
DEFAULT_MISSING_MARKERS = ("NA", "N/A", "n/a", "#N/A", "NaN", "nan", "null", "NULL", "?", "-")

# ``ppbn schema infer``: the order of proposed states, and when a numeric column is continuous
ORDERS = ("first-seen", "sorted")
DEFAULT_BINS = 4
# a numeric column with more distinct values than this is proposed as continuous
DEFAULT_NUMERIC_LEVELS = 10
