"""``python -m harel.cli``: the same as the ``harel`` console script."""

from harel.cli import main

main()
