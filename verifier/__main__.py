"""`python -m verifier` runs the `evidence` command line."""

from verifier.cli import main

main()
