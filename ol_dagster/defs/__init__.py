"""The Dagster shell: assets, checks, sensors and resources, built per sync definition."""
