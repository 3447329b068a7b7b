"""The ``ol-dagster`` command and everything only it uses: ``cli`` parses the command line and
hands each subcommand to its module (``headless`` for ``sync``, ``sender`` for ``send``,
``inspection`` for ``inspect``, ``demo``); nothing outside this package imports it, so the receiver
and the Dagster code location never load a command's code."""
