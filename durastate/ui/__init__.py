"""The web console (``durastate ui``): executions, one execution with its statechart, its trace, the
definitions with their running executions per state — read-only unless started with ``--allow-control``.

A Starlette app (:mod:`durastate.ui.app`) over one store, served by uvicorn (:mod:`durastate.ui.server`);
pages are Jinja2 templates, the chart is SVG drawn on the server, and the only script is the package's own
``static/console.js`` (live updates): nothing is loaded from the network. Needs the ``ui`` extra.
"""
