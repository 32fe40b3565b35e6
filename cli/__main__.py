"""``python -m cli`` runs the ``coe`` command."""

from cli.main import main

main()
