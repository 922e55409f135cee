"""whiz: a local, real-time coding-model system.

The seams between the parts are Protocols in `whiz.seams`; this module stays import-light so
that `whiz --help` is instant.
"""

__version__ = "0.1.0"
