"""Ledger schema 4: the curator's registration of each dataset (issue 32 §1), one row per
registration, so every change is kept: the source, column roles and declared types, the
missing-value policy, the unit and public facts, n counted by the curator, and whether
evaluation mode is allowed. Existing datasets get no registration (their curator registers
them); nothing else changes.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the table as revision 0004 created it, written out on purpose (frozen history)
    op.create_table(
        "ledger_registrations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dataset", sa.String(256), nullable=False, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("registration", sa.Text, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("evaluation_allowed", sa.Boolean, nullable=False),
        sa.Column("by", sa.String(256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("dataset", "version", name="uq_registration_version"),
    )
    meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.execute(meta.update().where(meta.c.key == "schema").values(value="dpcausal-ledger/4"))


def downgrade() -> None:
    raise NotImplementedError("a ledger is never downgraded: it records people's privacy spend")
