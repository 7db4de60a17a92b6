"""The protocols' defaults that the command line shows in its help, without numpy:
importing this module loads nothing beyond the standard library (``ppbn --help`` stays
fast). ``protocols.channel`` takes them from here."""

from __future__ import annotations

DEFAULT_TIMEOUT_S = 120.0  # how long a party waits for its peer's next message
MAX_TERM_LANES = 64  # the most terms lanes a job may ask for (each party's policy may allow fewer)
# a job that leaves its terms lanes to the parties (learning/lanes_agreement.py)
AUTO_LANES = "auto"
# SoftSpokenOT's k of the OT extension (``ot.py``): 8 sends the fewest bytes, 4 the least CPU
DEFAULT_SUBFIELD_BITS = 8
SUBFIELD_CHOICES = (4, 8)

# security levels of a job (``ppbn.protocols.security`` says what each promises), weakest first
SEMI_HONEST = "semi-honest"
COVERT = "covert"
MALICIOUS = "malicious"
SECURITY_LEVELS = (SEMI_HONEST, COVERT, MALICIOUS)
