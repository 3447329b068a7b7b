"""Tests of what a batch changed in the lineage, and how it is shown."""
