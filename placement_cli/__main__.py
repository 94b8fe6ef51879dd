"""Entry point for ``python -m placement_cli``."""

from placement_cli.cli import main

main()
