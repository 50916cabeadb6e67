"""`python -m console` runs the reclaim CLI."""

from console.cli import main

main()
