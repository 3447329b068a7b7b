"""The field flows of a packed graph, held as their rows until something reads them.

An unchanged night reuses the last graph whole (``lineage.reuse.build_whole``): its upload only
stamps the field flows of unchanged jobs, and its change record compares none. Building one
object per flow to count them was a twentieth of that sync (150,000 flows at 10,000 jobs), so
``lineage.packed.unpack`` leaves them here (``LineageGraph.read_later``) and they are built when
``LineageGraph.field_flows`` is first read, or only those of some jobs
(``LineageGraph.field_flows_of``).
"""

from __future__ import annotations

from array import array
from collections.abc import Container, Iterator, Sequence

from ol_dagster.gcpause import gc_paused
from ol_dagster.lineage.graph import FieldFlow, FieldKey, NodeKey


class UnreadFlows:
    """The field flows of a packed graph as their rows were read (``UnreadFieldFlows``): each
    line's indexes into the node, field and label tables of its reader, and the node indexes of
    the jobs a base line keeps (None: all). Built in the order reading them at once adds them,
    so the set is the same one. The rows are checked as they are added, so a damaged graph
    still fails ``unpack`` (where the sync normalizes again), not its first reader."""

    def __init__(self) -> None:
        self.chunks: list[
            tuple[array[int], list[FieldKey], list[NodeKey], list[str | None], set[int] | None]
        ] = []
        self.count = 0

    def add(
        self,
        rows: list[int],
        tables: tuple[list[FieldKey], list[NodeKey], list[str | None]],
        kept: set[int] | None = None,
    ) -> None:
        """A line's rows, with its reader's tables (fields, nodes, labels) and the jobs it keeps."""
        ends, nodes, labels = tables
        if len(rows) % 5:
            raise ValueError("field flow rows cut short")
        try:
            # machine integers: a list's int objects would take more memory than the flows
            held = array("q", rows)
        except (TypeError, OverflowError):
            raise ValueError("field flow rows that are not indexes") from None
        if held:
            # the writer's indexes: from 0, and -1 for no label (the last entry of ``labels``,
            # before which later lines insert theirs)
            named = len(labels) - 1
            for start, low, high in ((0, 0, len(ends)), (1, 0, len(ends)), (2, 0, len(nodes))):
                column = held[start::5]
                if min(column) < low or max(column) >= high:
                    raise ValueError("a field flow naming what the graph does not hold")
            for start in (3, 4):
                column = held[start::5]
                if min(column) < -1 or max(column) >= named:
                    raise ValueError("a field flow naming a label the graph does not hold")
        # the tables only grow as later lines come: these indexes keep their meaning
        self.chunks.append((held, ends, nodes, labels, kept))
        self.count += len(rows) // 5 if kept is None else sum(j in kept for j in rows[2::5])

    def __len__(self) -> int:
        return self.count

    def read(self, jobs: Container[NodeKey], *, but: bool = False) -> Iterator[FieldFlow]:
        """The flows of ``jobs`` (of every job but those, with ``but``), each job judged once,
        by its index, built now."""
        for rows, ends, nodes, labels, kept in self.chunks:
            wanted = {
                j
                for j in set(rows[2::5])
                if (kept is None or j in kept) and ((nodes[j] in jobs) is not but)
            }
            if wanted:
                yield from flows_of(rows, ends, nodes, labels, wanted)

    @gc_paused()  # as reading them at once was (``unpack``): objects without cycles
    def all(self) -> set[FieldFlow]:
        """Every flow, built now: the set reading them at once gives, in its order."""
        out: set[FieldFlow] = set()
        for rows, ends, nodes, labels, kept in self.chunks:
            out.update(flows_of(rows, ends, nodes, labels, kept))
        return out

    def restricted(self, jobs: Container[NodeKey]) -> UnreadFlows:
        """These flows, of ``jobs`` only: still unread, their rows shared."""
        out = UnreadFlows()
        for rows, ends, nodes, labels, kept in self.chunks:
            of_jobs = rows[2::5]
            wanted = {j for j in set(of_jobs) if (kept is None or j in kept) and nodes[j] in jobs}
            if wanted:
                out.chunks.append((rows, ends, nodes, labels, wanted))
                out.count += sum(map(wanted.__contains__, of_jobs))
        return out

    def jobs_with_end_outside(self, datasets: Container[NodeKey]) -> set[NodeKey]:
        """The jobs with a flow one of whose ends lies in a dataset not in ``datasets``, told
        by the rows' indexes: no flow is built."""
        outside: dict[int, set[int]] = {}  # per field table (the tables only grow): its ends'
        out: set[NodeKey] = set()
        for rows, ends, nodes, _, kept in self.chunks:
            bad = outside.get(id(ends))
            if bad is None:
                bad = outside[id(ends)] = {
                    i for i, end in enumerate(ends) if end[:2] not in datasets
                }
            if not bad:
                continue
            found = {
                j
                for a, b, j in zip(rows[::5], rows[1::5], rows[2::5], strict=True)
                if a in bad or b in bad
            }
            out.update(nodes[j] for j in found if kept is None or j in kept)
        return out


class HeldFlows:
    """Field flows already built (a graph normalized rather than read back), with the reads of
    ``UnreadFlows`` that ``lineage.reuse`` takes from an earlier graph's flows."""

    def __init__(self, flows: set[FieldFlow]) -> None:
        self.flows = flows

    def __len__(self) -> int:
        return len(self.flows)

    def read(self, jobs: Container[NodeKey], *, but: bool = False) -> Iterator[FieldFlow]:
        return (f for f in self.flows if (f.job in jobs) is not but)

    def all(self) -> set[FieldFlow]:
        return set(self.flows)

    def restricted(self, jobs: Container[NodeKey]) -> HeldFlows:
        return HeldFlows(set(self.read(jobs)))

    def jobs_with_end_outside(self, datasets: Container[NodeKey]) -> set[NodeKey]:
        return {
            f.job
            for f in self.flows
            if f.source[:2] not in datasets or f.target[:2] not in datasets
        }


class KeptAndBuilt:
    """A graph's field flows as ``lineage.reuse`` leaves them: those of the jobs it took as
    they were, still held as the earlier graph had them (``kept``), and those it built (of
    the other jobs: no job has flows in both). Nothing builds the kept ones unless it reads
    them, which on an edited night the upload, the change record and packing do not."""

    def __init__(self, kept: UnreadFlows | HeldFlows, built: set[FieldFlow]) -> None:
        self.kept = kept
        self.built = HeldFlows(built)

    def __len__(self) -> int:
        return len(self.kept) + len(self.built)

    def read(self, jobs: Container[NodeKey], *, but: bool = False) -> Iterator[FieldFlow]:
        yield from self.kept.read(jobs, but=but)
        yield from self.built.read(jobs, but=but)

    def all(self) -> set[FieldFlow]:
        out = self.kept.all()
        out.update(self.built.flows)
        return out


def flows_of(
    rows: Sequence[int],
    ends: list[FieldKey],
    nodes: list[NodeKey],
    labels: list[str | None],
    jobs: Container[int] | None = None,
) -> Iterator[FieldFlow]:
    """The field flows of a packed line's ``rows`` (source, target, job, transformation and
    subtype: indexes into its reader's tables), or of those whose job index is in ``jobs``: the
    one place they are built, read at once or held (``UnreadFlows``)."""
    if len(rows) % 5:
        raise ValueError("field flow rows cut short")
    if jobs is None:  # in C but for the flows themselves
        return map(
            FieldFlow,
            map(ends.__getitem__, rows[::5]),
            map(ends.__getitem__, rows[1::5]),
            map(nodes.__getitem__, rows[2::5]),
            map(labels.__getitem__, rows[3::5]),
            map(labels.__getitem__, rows[4::5]),
        )
    return (
        FieldFlow(ends[a], ends[b], nodes[j], labels[t], labels[u])
        for a, b, j, t, u in zip(
            rows[::5], rows[1::5], rows[2::5], rows[3::5], rows[4::5], strict=True
        )
        if j in jobs
    )
