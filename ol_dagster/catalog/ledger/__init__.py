"""The sync ledger and the catalogs that clean through it.

OpenMetadata and Marquez take OpenLineage events and keep no scope a cleanup could select by, so
what each definition sent them is recorded in the event store's database (``entries``: the
``Ledger``) with the catalog's time, and ``catalog.LedgerCatalog`` implements the ``Catalog``
protocol over it once for both: a backend adds only ``send``, ``clock`` and three deletes.
"""
