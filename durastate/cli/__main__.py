"""``python -m durastate.cli``: the same as the ``durastate`` console script."""

from durastate.cli import main

main()
