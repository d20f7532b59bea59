"""`python -m labcoat.cli`: the `labcoat` command."""

from labcoat.cli import main

main()
