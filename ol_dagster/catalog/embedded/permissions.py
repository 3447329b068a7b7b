"""The catalog's users and their permissions: cleanup needs ``SYSTEMS_ADMIN``, as Blindata's does.

A new catalog's own sync user administers Systems; a test or an operator can take it away
(``set_permissions``), and every cleanup call is then refused with ``CleanupPermissionDenied``.
"""

from __future__ import annotations

from sqlalchemy import Connection, func, select, update

from ol_dagster.catalog.embedded.tables import SYSTEMS_ADMIN, users
from ol_dagster.catalog.protocol import CleanupPermissionDenied


def admit_first_user(conn: Connection, user: str) -> None:
    """A new catalog (no user yet): its own sync user administers Systems."""
    if conn.execute(select(func.count()).select_from(users)).scalar_one() == 0:
        conn.execute(users.insert().values(name=user, permissions=[SYSTEMS_ADMIN]))


def set_permissions(conn: Connection, user: str, permissions: list[str]) -> None:
    if (
        conn.execute(
            update(users).where(users.c.name == user).values(permissions=permissions)
        ).rowcount
        == 0
    ):
        conn.execute(users.insert().values(name=user, permissions=permissions))


def require_admin(conn: Connection, user: str) -> None:
    """Refuse a cleanup call of a user without ``SYSTEMS_ADMIN``."""
    perms = conn.execute(select(users.c.permissions).where(users.c.name == user)).scalar()
    if SYSTEMS_ADMIN not in (perms or []):
        raise CleanupPermissionDenied(f"user {user!r} lacks {SYSTEMS_ADMIN}: cleanup refused")
