"""The model test's generators draw what they claim: settings that load, adversarial names.

``ol_dagster_tests.model.generate`` builds its universes from look-alike namespace families that it
says admit no common namespace, so that every universe is settings a user could start with (two
definitions on one catalog admitting a common namespace are refused at load). Here each family
and a sample of universes go through the settings' own load, and the names are checked to be the
adversarial ones the model test needs (a generator that quietly drew tame names would make the
proof pass for the wrong reason).
"""

from __future__ import annotations

import unicodedata
from fnmatch import fnmatchcase

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ol_dagster.settings import Settings
from ol_dagster_tests.model import generate as g
from ol_dagster_tests.model.reference import DefinitionSpec, ReferenceModel


def _settings(universe: tuple[DefinitionSpec, ...]) -> Settings:
    return Settings.model_validate(
        {
            "store": {"url": "sqlite:///store.db"},
            "catalogs": {"main": {"kind": "embedded", "url": "sqlite:///catalog.db"}},
            "definitions": [g.definition_data(s) for s in universe],
        }
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g.universes())
def test_every_universe_loads_as_settings(universe: tuple[DefinitionSpec, ...]):
    loaded = _settings(universe)
    for spec, d in zip(universe, loaded.definitions, strict=True):
        # the model's reading of a pattern is the settings' (every namespace of the pool)
        for ns in (*g.ALL_NAMESPACES, *g.FOREIGN):
            assert spec.admits(ns) == any(fnmatchcase(ns, p) for p in d.namespace_patterns), (
                spec.name,
                ns,
            )


@pytest.mark.parametrize("a", sorted(g.FAMILIES))
def test_two_families_on_one_catalog_load(a: str):
    """Every two families (and the shared namespaces, declared by both) load side by side."""
    for b in g.FAMILIES:
        if b == a:
            continue
        one = g.definition_spec("snap", allowed=g.FAMILIES[a][0], shared=g.SHARED_PATTERNS)
        two = g.definition_spec("multi", allowed=g.FAMILIES[b][0], shared=g.SHARED_PATTERNS)
        _settings((one, two))


def test_a_family_admits_its_namespaces_and_no_other_families():
    for name, (patterns, members) in g.FAMILIES.items():
        for ns in g.ALL_NAMESPACES:
            admitted = any(fnmatchcase(ns, p) for p in patterns)
            assert admitted == (ns in members), (name, ns)


def test_the_names_are_adversarial():
    jobs = {j for ns in g.ALL_NAMESPACES for j in g.jobs_of(ns)}
    datasets = {n for _, n in (*g.DATASETS, *g.RARE_DATASETS)}
    names = set(g.ALL_NAMESPACES) | jobs | datasets
    for c in "|#./:%_?*[ ":
        assert any(c in n for n in names), c
    assert {"etl", "ETL", "Etl"} <= set(g.ALL_NAMESPACES)  # case variants of one name
    assert g.NFC_ETL != g.NFD_ETL  # one name in two normal forms, both namespaces
    assert unicodedata.normalize("NFC", g.NFD_ETL) == g.NFC_ETL
    assert {g.NFC_ETL, g.NFD_ETL} <= set(g.ALL_NAMESPACES)
    assert {g.NFC_CAFE, g.NFD_CAFE} <= jobs and {g.NFC_CAFE, g.NFD_CAFE} <= datasets
    assert min(map(len, names)) == 1
    assert max(map(len, names)) == g.MAX_NAME_LENGTH
    assert g.LONG_NAMESPACE in g.ALL_NAMESPACES and g.LONG_JOB in jobs
    assert len(g.TOO_LONG) == g.MAX_NAME_LENGTH + 1
    # owners a string format would confuse: a|b + c and a + b|c; y and y#orchestration
    assert "c" in g.jobs_of("a|b") and "b|c" in g.jobs_of("a")
    assert {"y", "y#orchestration"} <= set(g.jobs_of("x"))


def test_posts_reach_dataset_only_batches_and_each_rejection():
    """Over many posts, the factory draws batches of DatasetEvents alone, and events refused as
    invalid, for a foreign namespace and for a name over ``limits.maxNameLength``."""
    seen: set[str] = set()

    @settings(
        max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(st.data())
    def posts(data: st.DataObject) -> None:
        universe = data.draw(g.universes())
        model = ReferenceModel(list(universe))
        factory = g.EventFactory()
        for _ in range(100):
            spec = data.draw(st.sampled_from(universe))
            events = factory.events(data, spec)
            if events and all(e.kind == "dataset" for e in events):
                seen.add("datasets only")
            for e in events:
                if e.kind == "invalid":
                    seen.add("invalid")
                elif e.kind != "dataset" and not spec.admits(e.namespace):
                    seen.add("foreign")
                elif not model.accepts(spec, e):
                    seen.add("too long")

    posts()
    assert seen == {"datasets only", "invalid", "foreign", "too long"}
