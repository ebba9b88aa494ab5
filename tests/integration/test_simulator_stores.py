"""The simulator's fresh stores keep the store options of the URL they are given."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from postgres_server import POSTGRES_URL
from sessionwire.testing import fresh_stores


def test_each_run_gets_a_new_schema_with_the_urls_other_options(postgres_url: str) -> None:
    # CI's run on a Citus cluster hands the simulator `…?distribution=citus`: every
    # seed's store must be made distributed, not silently as plain tables.
    stores = fresh_stores(f"{POSTGRES_URL}?schema=given&lease_seconds=7&upgrade=yes")
    with stores.fresh() as first, stores.fresh() as second:
        made = [parse_qs(urlsplit(url).query) for url in (first, second)]
    assert [query["lease_seconds"] for query in made] == [["7"], ["7"]]
    assert [query["upgrade"] for query in made] == [["yes"], ["yes"]]
    assert made[0]["schema"] != made[1]["schema"]
    assert "given" not in made[0]["schema"] + made[1]["schema"]
    stores.close()
