"""The change picture as a user sees it: in Dagster's UI, in a real (headless) Chromium.

A code location of the test's own materializes an asset whose metadata carries
``picture_markdown`` (as the ``catalog_upload`` materialization does); Dagster's webserver serves
it on a loopback port, Chromium opens the asset, clicks "[Show Markdown]" and must find the
picture loaded (an image whose SVG decoded, of its full width), then takes a screenshot. Skipped
when no Chromium is installed (``apt-get install chromium``). Marked ``producers``: a browser and
a webserver take half a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ol_dagster.changes.picture import picture_markdown, render_svg
from ol_dagster_tests.producers.browser import browser_page, chromium
from ol_dagster_tests.producers.harness import free_port

pytestmark = [pytest.mark.producers, pytest.mark.timeout(600)]

DB = "duckdb://warehouse/"
NODES = [
    ("d:raw", f"{DB}main.raw_orders", "dataset", "context"),
    ("j:stg", "shop.main.shop.stg_orders", "job", "changed"),
    ("d:stg", f"{DB}main.stg_orders", "dataset", "changed"),
    ("j:totals", "shop.main.shop.customer_totals", "job", "context"),
    ("d:totals", f"{DB}main.customer_totals", "dataset", "context"),
    ("j:margin", "shop.main.shop.order_margins", "job", "added"),
    ("d:margin", f"{DB}main.order_margins", "dataset", "added"),
    ("j:legacy", "shop.main.shop.legacy_orders", "job", "removed"),
    ("d:legacy", f"{DB}main.legacy_orders", "dataset", "removed"),
]
EDGES = [
    ("d:raw", "j:stg", "context"),
    ("j:stg", "d:stg", "changed"),
    ("d:stg", "j:totals", "context"),
    ("j:totals", "d:totals", "context"),
    ("d:stg", "j:margin", "added"),
    ("j:margin", "d:margin", "added"),
    ("d:raw", "j:legacy", "removed"),
    ("j:legacy", "d:legacy", "removed"),
]
CODE_LOCATION = """
from dagster import Definitions, MaterializeResult, MetadataValue, asset

@asset
def catalog_upload():
    return MaterializeResult(metadata={{"lineage changes": MetadataValue.md({markdown})}})

defs = Definitions(assets=[catalog_upload])
"""


def dagster_command(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def test_the_picture_shows_in_dagster_ui(tmp_path: Path) -> None:
    if chromium() is None:
        pytest.skip("no chromium on the PATH: apt-get install chromium")
    markdown = picture_markdown(NODES, EDGES)
    location = tmp_path / "location.py"
    location.write_text(CODE_LOCATION.format(markdown=json.dumps(markdown)))
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    subprocess.run(
        [dagster_command("dagster"), "asset", "materialize", "-f", str(location)]
        + ["--select", "catalog_upload"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    with (tmp_path / "webserver.log").open("wb") as log:
        web = subprocess.Popen(
            [dagster_command("dagster-webserver"), "-f", str(location), "-h", "127.0.0.1"]
            + ["-p", str(port := free_port())],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        url = _webserver_url(web, f"http://127.0.0.1:{port}", tmp_path / "webserver.log")
        with browser_page(tmp_path / "chromium") as page:
            page.send("Page.navigate", url=f"{url}/assets/catalog_upload?view=events")
            page.wait_for(_CLICK_SHOW_MARKDOWN, timeout=120)
            size = page.wait_for(_PICTURE_LOADED, timeout=60)
            time.sleep(1)  # the dialog's opening animation
            page.screenshot(tmp_path / "change-picture.png")
    finally:
        web.terminate()
        web.wait(timeout=30)
    width = int(render_svg(NODES, EDGES).split('width="', 1)[1].split('"', 1)[0])
    assert size == [width, True], "the picture did not show at its own width"
    print(f"screenshot: {tmp_path / 'change-picture.png'}")


# click the link Dagster shows for a long Markdown value; true once clicked
_CLICK_SHOW_MARKDOWN = """(() => {
  const link = [...document.querySelectorAll('*')].find(
    e => e.childElementCount === 0 && e.textContent.trim() === '[Show Markdown]');
  if (!link) return false;
  link.click();
  return true;
})()"""
# the picture inside the dialog once decoded: its natural width, and whether its alt text is set
_PICTURE_LOADED = """(() => {
  const img = document.querySelector('img[src^="data:image/svg+xml;base64,"]');
  return img && img.complete && img.naturalWidth > 0
    ? [img.naturalWidth, img.alt.startsWith('Lineage changes:')] : null;
})()"""


def _webserver_url(web: subprocess.Popen, url: str, log: Path) -> str:
    """``url`` once the webserver answers there."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert web.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError(f"dagster-webserver did not start:\n{log.read_text()[-3000:]}")
