"""Upload and cleanup: the sync rules of the Blindata seed, over the ``Catalog`` protocol."""
