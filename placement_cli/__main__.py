"""Entry point for ``python -m placement_cli``."""

from placement_cli.entry import main

main()
