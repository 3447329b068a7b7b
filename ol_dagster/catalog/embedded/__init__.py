"""The embedded catalog: a real catalog in SQLAlchemy, the default target of every definition."""

from ol_dagster.catalog.embedded.catalog import EmbeddedCatalog

__all__ = ["EmbeddedCatalog"]
