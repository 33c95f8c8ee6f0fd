"""``python -m vigil``."""

from vigil.cli import main

main()
