"""The reference model's fan-out rules: one feed, several catalogs, and which runs touch which.

Written from issue 17's contract ("one feed, several catalogs: each catalog its own cutoff, upload,
cleanup, guards and report; a retry keeps the catalogs that finished") and the seed's "one sync =
an upload, then its cleanup", and from nothing in ``ol_dagster``. What each catalog must hold is
``reference.ReferenceModel``'s, one instance per catalog; this says only:

* a catalog *finished* a batch when its last cleanup of the batch left it done there and no upload
  of the batch came after (an upload whose cleanup never ran, because its run died, owes that
  cleanup: the catalog's part is open again until a cleanup ends it);
* the batch is synced once a cleanup leaves every catalog finished, and stays synced until a
  cleanup leaves one not done (a re-sync whose upload failed): like the status of a batch with one
  catalog, it changes at cleanups only, so a catalog's upload in flight (or dead) holds it back;
* a run of the whole sync started while the batch is not finished in every catalog (a retry, or a
  run after one that died) leaves alone the catalogs that had finished it when the run started,
  whatever other runs do meanwhile; a run started when every catalog had finished it (a person
  re-materializing the batch) syncs it in every catalog again, as with one catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FanoutModel:
    keys: tuple[str, ...]
    # (batch, catalog) pairs whose last cleanup left the batch done there (the catalog's model)
    done: set[tuple[int, str]] = field(default_factory=set)
    # (batch, catalog) pairs uploaded since their last cleanup (the cleanup is owed)
    owed: set[tuple[int, str]] = field(default_factory=set)
    kept: dict[str, frozenset[str]] = field(default_factory=dict)  # run -> catalogs it keeps
    synced: set[int] = field(default_factory=set)  # batches synced as a whole

    def finished(self, batch_id: int, key: str) -> bool:
        return (batch_id, key) in self.done and (batch_id, key) not in self.owed

    def begin(self, run_id: str, batch_id: int) -> frozenset[str]:
        """The catalogs the run leaves alone."""
        finished = {k for k in self.keys if self.finished(batch_id, k)}
        kept = frozenset() if finished == set(self.keys) else frozenset(finished)
        self.kept[run_id] = kept
        return kept

    def uploaded(self, batch_id: int, key: str) -> None:
        self.owed.add((batch_id, key))

    def cleaned(self, batch_id: int, key: str, done: bool) -> None:
        self.owed.discard((batch_id, key))
        if done:
            self.done.add((batch_id, key))
        else:
            self.done.discard((batch_id, key))
        if all(self.finished(batch_id, k) for k in self.keys):
            self.synced.add(batch_id)
        elif not done:
            self.synced.discard(batch_id)
