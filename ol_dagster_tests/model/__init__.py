"""The independent reference model of the removal rules, and the generators that drive it.

``reference`` is written from the seed's tables and the lead's decisions alone (it imports nothing
from ``ol_dagster``); ``generate`` builds universes and spec-valid OpenLineage events for it and
for the production code. ``test_lineage_safety_model.py`` compares the two after every step.
"""
