"""Lineage change sets: what a batch added, removed and changed in a catalog, and what it breaks.

Plain rules, no Dagster: each job's part of a graph (``parts``), the change set of a batch from the
parts before and after it (``changeset``), the readers a removal leaves without their input
(``downstream``), and the picture of a change set (``picture``). The sync records them
(``ol_dagster.sync.changes``); Dagster and the ``ol-dagster changes`` command show them.
"""
