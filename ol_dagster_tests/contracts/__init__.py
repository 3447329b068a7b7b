"""The catalogs' own published definitions, vendored with their source, and checks of requests
against them (see each server's SOURCE.md)."""
