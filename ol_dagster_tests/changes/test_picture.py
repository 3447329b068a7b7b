"""The change picture: what a reader sees of it, read back from the SVG it is.

Each test parses the SVG (so it is well-formed XML whatever the labels hold) and reads what is
drawn: a box per node with its state's class and kind, edges left to right, the line that counts
what was not drawn. How it shows in Dagster's UI is ``producers/test_picture_in_dagster_ui.py``.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

import pytest

from ol_dagster.changes.picture import MAX_CHANGED, MAX_CONTEXT, picture_markdown, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def boxes(svg: str) -> dict[str, dict[str, object]]:
    """Each node drawn: its full title -> state, x and y of its box, and the label shown."""
    out: dict[str, dict[str, object]] = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        title = group.find(f"{SVG}title")
        if title is None:
            continue  # the legend
        rect = group.find(f"{SVG}rect")
        label = group.find(f"{SVG}text[@class='label']")
        assert rect is not None and label is not None and title.text
        out[title.text] = {
            "state": group.get("class", "").removeprefix("n-"),
            "x": float(rect.get("x", 0)),
            "y": float(rect.get("y", 0)),
            "label": label.text,
        }
    return out


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


CHAIN = [
    ("d:raw", "raw_orders", "dataset", "context"),
    ("j:stg", "stg_orders_job", "job", "changed"),
    ("d:stg", "stg_orders", "dataset", "changed"),
    ("j:new", "margins_job", "job", "added"),
    ("j:old", "legacy_job", "job", "removed"),
]
CHAIN_EDGES = [
    ("d:raw", "j:stg", "context"),
    ("j:stg", "d:stg", "changed"),
    ("d:stg", "j:new", "added"),
    ("d:stg", "j:old", "removed"),
]


def test_each_node_is_drawn_in_its_state_left_to_right() -> None:
    drawn = boxes(render_svg(CHAIN, CHAIN_EDGES))
    assert {title: box["state"] for title, box in drawn.items()} == {
        "dataset raw_orders (context)": "context",
        "job stg_orders_job (changed)": "changed",
        "dataset stg_orders (changed)": "changed",
        "job margins_job (added)": "added",
        "job legacy_job (removed)": "removed",
    }
    x = {title.split()[1]: box["x"] for title, box in drawn.items()}
    assert x["raw_orders"] < x["stg_orders_job"] < x["stg_orders"] < x["margins_job"]
    assert x["margins_job"] == x["legacy_job"]  # both read stg_orders: one column
    svg = render_svg(CHAIN, CHAIN_EDGES)
    # green added, red dashed removed, amber changed, grey context, as the legend says
    assert ".n-added .shape{fill:#dafbe1;stroke:#1a7f37" in svg
    assert re.search(r"\.n-removed \.shape\{[^}]*stroke:#cf222e[^}]*stroke-dasharray", svg)
    assert texts(svg)[:4] == ["added", "removed", "changed", "unchanged"]


def test_a_long_name_keeps_its_end_and_any_label_is_escaped() -> None:
    label = 'warehouse.analytics.<script>alert("x")</script>&orders_by_customer'
    svg = render_svg([("a", label, "dataset", "added")], [])
    ((title, box),) = boxes(svg).items()
    assert title == f"dataset {label} (added)"
    assert box["label"] == "…" + label[-24:]
    assert "<script>" not in svg


def test_fifty_changed_objects_are_drawn_and_the_rest_counted() -> None:
    nodes, edges = [], []
    for i in range(170):
        state = ("added", "removed", "changed")[i % 3]
        nodes += [(f"j{i}", f"job_{i}", "job", state), (f"d{i}", f"table_{i}", "dataset", state)]
        edges.append((f"j{i}", f"d{i}", state))
    nodes += [(f"c{i}", f"source_{i}", "dataset", "context") for i in range(40)]
    edges += [(f"c{i}", f"j{i}", "context") for i in range(40)]
    svg = render_svg(nodes, edges)
    drawn = boxes(svg)
    changed = [b for b in drawn.values() if b["state"] != "context"]
    assert len(changed) == MAX_CHANGED
    assert 0 < len(drawn) - len(changed) <= MAX_CONTEXT
    # whole neighbourhoods: a job is drawn with the table it writes
    assert all(f"dataset table_{t.split()[1][4:]}" in " ".join(drawn) for t in drawn if "job_" in t)
    counted = [t for t in texts(svg) if t.startswith("+")]
    # 114 added, 114 removed, 112 changed in all; the added are taken first
    assert counted == ["+290 more not drawn: 64 added, 114 removed, 112 changed"]
    for box in drawn.values():  # every box inside the picture
        root = ET.fromstring(svg)
        assert 0 <= float(box["x"]) < float(root.get("width", 0))  # type: ignore[arg-type]
        assert 0 <= float(box["y"]) < float(root.get("height", 0))  # type: ignore[arg-type]


def test_a_cycle_and_an_edge_to_an_unknown_node_are_drawn_without_fault() -> None:
    nodes = [("a", "a", "job", "changed"), ("b", "b", "dataset", "changed")]
    svg = render_svg(nodes, [("a", "b", "changed"), ("b", "a", "changed"), ("a", "z", "added")])
    assert set(boxes(svg)) == {"job a (changed)", "dataset b (changed)"}
    assert len(list(ET.fromstring(svg).iter(f"{SVG}path"))) == 4 + 2  # 4 arrowheads, 2 edges


def test_nothing_changed_says_so() -> None:
    assert "No lineage changes." in texts(render_svg([], []))


def test_a_node_of_no_known_state_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="lineage node 'broken': state 'renamed'"):
        render_svg([("x", "x", "job", "added"), ("broken", "b", "job", "renamed")], [])
    with pytest.raises(ValueError, match="'x': kind 'table'"):
        render_svg([("x", "x", "table", "added")], [])


def test_the_markdown_is_an_image_dagster_shows() -> None:
    markdown = picture_markdown(CHAIN, CHAIN_EDGES)
    found = re.fullmatch(r"!\[([^\]]*)\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert found, markdown[:200]
    assert found[1] == "Lineage changes: 1 added, 1 removed, 2 changed"
    assert base64.b64decode(found[2]).decode() == render_svg(CHAIN, CHAIN_EDGES)
