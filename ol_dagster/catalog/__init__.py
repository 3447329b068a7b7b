"""Catalogs ol-dagster syncs into, behind one ``Catalog`` protocol."""
