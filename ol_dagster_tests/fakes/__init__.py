"""In-process fakes of the catalogs ol-dagster syncs into, written from their documented contracts.

Each fake is a Starlette app keeping its state in memory, with an injectable clock (the ``Date``
header of every answer) and failure injection (statuses, ``Retry-After``, slow answers). The fakes
never import ol-dagster's client code: a test that passes against them checks the client against
the contract, not against itself.
"""
