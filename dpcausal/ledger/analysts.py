"""Remote analysts the curator admits (issue 40): who may ask, about which datasets, within what.

An analyst holds a URL and a token, nothing else. The curator adds the analyst by name with the
datasets they may ask about and, optionally, their own zeta-GDP cap on each, within the
dataset's cap (:meth:`dpcausal.ledger.Ledger.add_analyst`). The token is shown once and stored
only as a salted scrypt hash; it reads ``dpca_<id>_<secret>``, where ``<id>`` (random, public)
finds the analyst's row and only the secret is hashed and compared in constant time.

Every reservation made for an analyst checks, in the same transaction that locks the dataset
and composes its charges (:meth:`dpcausal.ledger.Ledger.release`), that the analyst exists, is
not revoked and is admitted to the dataset, and that the analyst's own charges on it, with the
new one, stay within the analyst's cap; so two analysts asking at once can exceed neither the
dataset's cap nor their own. The charge row records the analyst (None: the curator's own run).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import schema
from dpcausal.ledger.composition import Cap, Spend, compose, within_cap
from dpcausal.ledger.errors import BudgetExceededError

_A = schema.analysts
_G = schema.analyst_datasets
_T = schema.charges

TOKEN_PREFIX = "dpca_"
#: scrypt's cost (RFC 7914; n=2^14, r=8, p=1: 16 MiB and ~50 ms a check, OWASP's minimum)
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class AnalystRefusedError(ValueError):
    """A token or analyst the ledger does not admit (unknown, revoked, or not admitted to the
    dataset asked about); nothing was recorded or drawn."""


class AnalystBudgetExceededError(BudgetExceededError):
    """A release would exceed the analyst's own cap on the dataset (nothing recorded)."""

    def in_words_of(self, raise_with: str) -> AnalystBudgetExceededError:
        """The analyst's cap is raised by the curator's grant only, whatever the interface."""
        return self


@dataclass(frozen=True)
class Analyst:
    """An analyst as the ledger records them: ``datasets`` maps each dataset they may ask about
    to their own zeta cap on it (None: only the dataset's cap); ``by`` and ``created_at`` say
    who added them and when; ``revoked_at`` is set once revoked (never undone)."""

    name: str
    datasets: dict[str, float | None]
    by: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def hash_secret(secret: str, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$<salt hex>$<hash hex>`` of ``secret`` under a fresh 16-byte salt."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(secret.encode(), salt=salt, dklen=32, **_SCRYPT)
    return "scrypt${n}${r}${p}$".format(**_SCRYPT) + f"{salt.hex()}${digest.hex()}"


def secret_matches(secret: str, stored: str) -> bool:
    """Whether ``secret`` hashes to ``stored`` (:func:`hash_secret`), compared in constant
    time."""
    kind, n, r, p, salt, digest = stored.split("$")
    assert kind == "scrypt", f"bug: unknown token hash {kind!r}"
    given = hashlib.scrypt(secret.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r),
                           p=int(p), dklen=32)
    return hmac.compare_digest(given, bytes.fromhex(digest))


def _split_token(token: object) -> tuple[str, str]:
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        return "", ""
    token_id, _, secret = token[len(TOKEN_PREFIX):].partition("_")
    return token_id, secret


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"analyst name must be 1-64 letters, digits, '_', '.' or '-' starting "
                         f"with a letter or digit, got {name!r}")
    return name


def add(conn: Connection, name: str, datasets: Sequence[str], zeta: float | None,
        caps: Mapping[str, Cap], by: str) -> str:
    """Record analyst ``name`` admitted to ``datasets`` (their ``caps``), with their own
    ``zeta`` cap on each; returns the new token (stored only as its hash)."""
    check_name(name)
    if zeta is not None:
        if not (isinstance(zeta, (int, float)) and math.isfinite(zeta) and zeta > 0):
            raise ValueError(f"zeta must be a positive number, got {zeta!r}")
        for dataset, cap in caps.items():
            if not within_cap([PrivacyCharge("gaussian", zeta=float(zeta))], cap)[0]:
                raise ValueError(
                    f"zeta={zeta:g} is not within the cap of dataset {dataset} "
                    f"({cap.describe()}): an analyst's cap lies within each dataset's cap")
    if conn.execute(sa.select(_A.c.name).where(_A.c.name == name)).first() is not None:
        raise ValueError(f"analyst {name!r} exists already (names are never reused, so the "
                         "ledger's record of who asked stays unambiguous); choose a new name")
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    conn.execute(_A.insert().values(name=name, token_id=token_id, token_hash=hash_secret(secret),
                                    by=by, created_at=datetime.now(UTC)))
    for dataset in datasets:
        conn.execute(_G.insert().values(analyst=name, dataset=dataset,
                                        zeta=None if zeta is None else float(zeta)))
    return f"{TOKEN_PREFIX}{token_id}_{secret}"


def read(conn: Connection, name: str | None = None) -> list[Analyst]:
    """Every analyst (or the one named), by name."""
    stmt = sa.select(_A).order_by(_A.c.name)
    if name is not None:
        stmt = stmt.where(_A.c.name == name)
    rows = conn.execute(stmt).mappings().all()
    grants: dict[str, dict[str, float | None]] = {}
    for g in conn.execute(sa.select(_G).order_by(_G.c.dataset)).mappings():
        grants.setdefault(g["analyst"], {})[g["dataset"]] = g["zeta"]
    return [Analyst(r["name"], grants.get(r["name"], {}), r["by"], _utc(r["created_at"]),
                    None if r["revoked_at"] is None else _utc(r["revoked_at"])) for r in rows]


def revoke(conn: Connection, name: str) -> Analyst:
    """Mark ``name`` revoked now (their token is refused from here on)."""
    found = read(conn, name)
    if not found:
        raise ValueError(f"no analyst {name!r}; `dpcausal analyst list` shows them")
    if found[0].active:
        conn.execute(_A.update().where(_A.c.name == name).values(revoked_at=datetime.now(UTC)))
    return read(conn, name)[0]


def authenticate(conn: Connection, token: object) -> Analyst:
    """The active analyst holding ``token``; :class:`AnalystRefusedError` for a malformed,
    unknown or revoked token (one message for all: a refusal says nothing about which)."""
    token_id, secret = _split_token(token)
    row = conn.execute(sa.select(_A).where(_A.c.token_id == token_id)).mappings().first() \
        if token_id else None
    # an unknown id costs one hash too, so timing does not tell ids apart
    stored = row["token_hash"] if row is not None else _dummy_hash()
    ok = secret_matches(secret, stored) and row is not None and row["revoked_at"] is None
    if not ok:
        raise AnalystRefusedError("the token is not valid (unknown or revoked); ask the curator "
                                  "for a new one")
    assert row is not None
    return read(conn, row["name"])[0]


def admit(conn: Connection, name: str, dataset: str, charge: PrivacyCharge, delta: float,
          ledger: str) -> Exception | None:
    """Why the reservation of ``charge`` on ``dataset`` for analyst ``name`` is refused (an
    unknown or revoked analyst, a dataset they are not admitted to, or their own cap, composed
    at the dataset's ``delta``), or None. Run under the dataset's lock."""
    found = read(conn, name)
    if not found or not found[0].active:
        return AnalystRefusedError(f"analyst {name!r} is unknown or revoked: nothing was "
                                   "charged")
    if dataset not in found[0].datasets:
        return AnalystRefusedError(f"analyst {name!r} is not admitted to dataset {dataset!r}: "
                                   "nothing was charged")
    zeta = found[0].datasets[dataset]
    if zeta is None:
        return None
    cap = Cap("zeta", zeta, delta)
    theirs = own_charges(conn, name, dataset)
    ok, total = within_cap([*theirs, charge], cap)
    if ok:
        return None
    return AnalystBudgetExceededError(
        f"{dataset} (analyst {name}'s own cap)", compose(theirs, delta).describe(),
        _describe(charge), cap.describe(), total.describe(), ledger=ledger,
        raise_with=f"a new grant from the curator to analyst {name}")


def own_charges(conn: Connection, name: str, dataset: str) -> list[PrivacyCharge]:
    """Every recorded charge (any status) analyst ``name`` asked for on ``dataset``."""
    from dpcausal.ledger.store import _row_charge

    rows = conn.execute(sa.select(_T).where(_T.c.dataset == dataset, _T.c.analyst == name)
                        .order_by(_T.c.id)).mappings()
    return [_row_charge(r) for r in rows]


def asked_by(conn: Connection, name: str, prefix: str | None = None) -> list[dict[str, Any]]:
    """Analyst ``name``'s charges, oldest first (those whose release id starts with
    ``prefix``, if given): release id, dataset, status, times and the committed ``result``."""
    stmt = (sa.select(_T.c.release_id, _T.c.dataset, _T.c.status, _T.c.reserved_at,
                      _T.c.finished_at, _T.c.result).where(_T.c.analyst == name)
            .order_by(_T.c.id))
    if prefix is not None:
        stmt = stmt.where(_T.c.release_id.startswith(prefix, autoescape=True))
    return [dict(r) for r in conn.execute(stmt).mappings()]


def spent(conn: Connection, name: str, dataset: str, delta: float) -> Spend:
    """The composed spend of analyst ``name``'s charges on ``dataset``."""
    return compose(own_charges(conn, name, dataset), delta)


def _describe(charge: PrivacyCharge) -> str:
    from dpcausal.ledger.store import _describe as describe

    return describe(charge)


def _utc(at: Any) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@functools.cache
def _dummy_hash() -> str:
    return hash_secret("", b"\0" * 16)
