"""The OpenLineage spec as ol-dagster reads it: event kinds, envelopes and their precise errors."""
