"""``python -m vigil`` (named ``vigil`` in help and errors, like the console script)."""

from vigil.cli import main

main(prog_name="vigil")
