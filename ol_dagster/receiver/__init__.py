"""The HTTP receiver producers post OpenLineage events to (``ol-dagster serve``)."""
