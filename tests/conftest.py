"""What every test process needs before any test runs.

Ctrl-C for the processes the tests start: several tests stop a ``durastate`` command with SIGINT, as a user
does (``trace --follow``, ``ui``, ``serve`` in the doc blocks), and expect it to exit cleanly. A process
started in the background by a non-interactive shell (``make test &``, a CI runner) inherits SIGINT
*ignored*; every child inherits that in turn, Python then installs no KeyboardInterrupt handler, and such a
test waits for an exit that never comes. An ignored disposition survives ``exec``, a handler does not: so
the test process takes Python's own handler back, and the commands it starts see SIGINT as a terminal gives
it to them.
"""

from __future__ import annotations

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
