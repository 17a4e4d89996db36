"""The webhook claim's live definitions, read in ``gateway/webhooks/store/claim.sql``, are the ones the
migrations leave (the last ``CREATE FUNCTION`` of each name) and the ones the migrated database runs:
the file is a copy for reading beside the feature, so it must never drift from what runs."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg

from gateway.storage.migrations import __file__ as migrations_init

CLAIM_SQL = Path(__file__).parents[2] / "gateway" / "webhooks" / "store" / "claim.sql"
MIGRATIONS = Path(migrations_init).parent
#: One function's definition: from its CREATE to the end of its body.
FUNCTION = re.compile(r"^CREATE (?:OR REPLACE )?FUNCTION (\w+)\(.*?^\$\$;$", re.MULTILINE | re.DOTALL)
BODY = re.compile(r"^AS \$\$\n(.*)^\$\$;$", re.MULTILINE | re.DOTALL)


def functions(sql: str) -> dict[str, str]:
    return {match.group(1): match.group(0) for match in FUNCTION.finditer(sql)}


def test_claim_sql_is_the_last_definition_of_each_of_its_functions_in_the_migrations() -> None:
    live = functions(CLAIM_SQL.read_text())
    assert set(live) == {"claim_delivery_jobs", "write_delivery_outcomes"}
    last: dict[str, str] = {}
    for migration in sorted(MIGRATIONS.glob("*.sql")):
        last.update(functions(migration.read_text()))
    for name, definition in live.items():
        assert definition == last[name], f"{name}: claim.sql differs from its last CREATE FUNCTION in the migrations"


async def test_the_migrated_database_runs_the_bodies_claim_sql_shows(db: asyncpg.Connection) -> None:
    for name, definition in functions(CLAIM_SQL.read_text()).items():
        body = BODY.search(definition)
        assert body is not None, name
        running = await db.fetch("SELECT prosrc FROM pg_proc WHERE proname = $1", name)
        assert body.group(1) in {row["prosrc"].lstrip("\n") for row in running}, name
