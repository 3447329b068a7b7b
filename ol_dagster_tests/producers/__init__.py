"""Tests against real producers (dbt, Airflow) and a real browser."""
