"""Ledger schema 2: the unit of privacy of every cap and charge, and keyed data fingerprints.

Existing caps and charges get unit ``row`` (what every release before this schema was stated
in); existing charges get no fingerprint. Nothing is dropped or rewritten otherwise.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ledger_datasets",
                  sa.Column("unit", sa.String(16), nullable=False, server_default="row"))
    op.add_column("ledger_charges",
                  sa.Column("unit", sa.String(16), nullable=False, server_default="row"))
    op.add_column("ledger_charges", sa.Column("fingerprint", sa.String(256)))
    op.create_table(
        "ledger_fingerprints",
        sa.Column("fingerprint", sa.String(256), primary_key=True),
        sa.Column("dataset", sa.String(256), sa.ForeignKey("ledger_datasets.name"),
                  nullable=False, index=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.execute(meta.update().where(meta.c.key == "schema")
               .values(value="dpcausal-ledger/2"))


def downgrade() -> None:
    raise NotImplementedError("a ledger is never downgraded: it records people's privacy spend")
