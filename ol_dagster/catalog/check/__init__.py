"""What every kind's ``ol-dagster check`` is made of: findings, reports and HTTP probes.

What is asked of each kind is in that kind's package (``catalog/<kind>/check.py``, declared as
its kind's checker), and the command as a whole in ``ol_dagster/commands/check.py``; here is only
what they share: ``findings`` (a finding, a report, the table a person reads) and ``probe`` (how
the HTTP checks ask a catalog: once each, through its own client, secrets scrubbed).

A finding carries whether the sync needs it (``needed_by_sync``): only those decide the exit
code; the others (clock skew, an unmapped namespace, ``Create``) are warnings. Secrets are never
printed: every detail is scrubbed of the resolved token and API key, URLs lose their passwords.
The checks ask the catalog with raw probes (not the client's methods), so a backend module keeps
only what the sync calls.
"""
