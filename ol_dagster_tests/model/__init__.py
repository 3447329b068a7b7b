"""The independent reference model of the removal rules, and the generators that drive it.

``reference`` is written from docs/deletion-rules.md and docs/configuration.md alone (it imports
nothing from ``ol_dagster``: no ownership decision, no namespace pattern logic, no scope string);
``generate`` builds universes and spec-valid OpenLineage events for it and for the production
code. ``test_lineage_safety_model.py`` compares the two after every step.
"""
