"""Subcommands of the ``ppbn`` CLI, one module per command group, discovered by ``ppbn.cli``."""
