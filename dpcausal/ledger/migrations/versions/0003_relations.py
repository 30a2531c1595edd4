"""Ledger schema 3: each cap's and charge's neighbouring relation (unit plus what it holds public),
and the log of corrections to a recorded charge's relation.

Revision 0002 gave every older charge unit ``row``, the user-level, client-level and label-DP
ones included. This revision derives each charge's relation from its stored detail, by the rules
below (frozen here: later code must not change how old rows were read), and logs every charge it
relabels in ``ledger_corrections`` (``by = "migration 0003"``):

- ``group_privacy_k`` in the detail: a row-level charge converted to groups, per ``user`` with
  nothing but n public;
- a user-level release (``occupancy_hash``, a ``neighbouring`` text starting "user-level",
  mechanism ``UserLevelRelease``): per ``user``, occupancy public (user_level_clip.md §1.3);
- a Cluster-DP release (detail ``unit`` = label, ``epsilon_paper``, mechanism ``ClusterDP`` or one
  of cluster/cluster_free/uniform): per ``label``, arm and cluster public (cluster_dp.md Def 2.2);
- a federated release (mechanism ``FederatedATE``/``pbm_secagg``, ``secure_aggregation``, the
  central Gaussian baseline): per ``client``, arm sizes public (federated_secagg.md Def 2.1);
- otherwise the recorded unit, with that unit's relation (row: nothing but n public).

A cap keeps its unit and gets that unit's relation. Nothing is dropped.

Revision ID: 0003
Revises: 0002
"""

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_DEFAULT = {"row": "", "user": "occupancy", "client": "arm_sizes", "label": "arm,cluster"}
_BY = "migration 0003"


def _derive(unit: str, detail: dict) -> tuple[str, str]:
    """(unit, public) of a charge recorded before relations were, from its stored detail."""
    mech = str(detail.get("mechanism", ""))
    cls = str(detail.get("mechanism_class", ""))
    if "group_privacy_k" in detail:
        return "user", ""
    if ("occupancy_hash" in detail or str(detail.get("neighbouring", "")).startswith("user-level")
            or mech.startswith("UserLevelRelease") or cls == "UserLevelRelease"):
        return "user", _DEFAULT["user"]
    if (detail.get("unit") == "label" or "epsilon_paper" in detail or mech.startswith("ClusterDP")
            or mech in {"cluster", "cluster_free", "uniform"} or cls == "ClusterDP"):
        return "label", _DEFAULT["label"]
    if (mech.startswith("FederatedATE") or mech == "pbm_secagg" or cls == "FederatedATE"
            or "secure_aggregation" in detail or detail.get("baseline") == "central_gaussian"):
        return "client", _DEFAULT["client"]
    return unit, _DEFAULT.get(unit, "")


def upgrade() -> None:
    op.add_column("ledger_datasets",
                  sa.Column("public", sa.String(256), nullable=False, server_default=""))
    op.add_column("ledger_charges",
                  sa.Column("public", sa.String(256), nullable=False, server_default=""))
    # the table as revision 0003 created it, written out here on purpose: a migration is frozen
    # history, so it must not follow later edits of schema.corrections (the same holds for the
    # snapshots under tests/library/ledger/fixtures/, which are ledgers written by old code)
    corrections = op.create_table(
        "ledger_corrections",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("release_id", sa.String(512), sa.ForeignKey("ledger_charges.release_id"),
                  nullable=False, index=True),
        sa.Column("old_unit", sa.String(16), nullable=False),
        sa.Column("old_public", sa.String(256), nullable=False),
        sa.Column("new_unit", sa.String(16), nullable=False),
        sa.Column("new_public", sa.String(256), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("by", sa.String(256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    conn = op.get_bind()
    datasets = sa.table("ledger_datasets", sa.column("name", sa.String),
                        sa.column("unit", sa.String), sa.column("public", sa.String))
    for name, unit in conn.execute(sa.select(datasets.c.name, datasets.c.unit)).all():
        conn.execute(datasets.update().where(datasets.c.name == name)
                     .values(public=_DEFAULT.get(unit, "")))
    charges = sa.table("ledger_charges", sa.column("id", sa.Integer),
                       sa.column("release_id", sa.String), sa.column("unit", sa.String),
                       sa.column("public", sa.String), sa.column("detail", sa.Text))
    now, log = datetime.now(UTC), []
    rows = conn.execute(sa.select(charges.c.id, charges.c.release_id, charges.c.unit,
                                  charges.c.detail).order_by(charges.c.id)).all()
    for cid, release_id, unit, detail in rows:
        new_unit, public = _derive(unit, json.loads(detail or "{}"))
        conn.execute(charges.update().where(charges.c.id == cid)
                     .values(unit=new_unit, public=public))
        if new_unit != unit:
            log.append(dict(release_id=release_id, old_unit=unit, old_public=_DEFAULT[unit],
                            new_unit=new_unit, new_public=public, by=_BY, at=now,
                            reason="derived from the charge's stored detail (revision 0002 had "
                                   "recorded every older charge per row)"))
    if log:
        op.bulk_insert(corrections, log)
    meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.execute(meta.update().where(meta.c.key == "schema").values(value="dpcausal-ledger/3"))


def downgrade() -> None:
    raise NotImplementedError("a ledger is never downgraded: it records people's privacy spend")
