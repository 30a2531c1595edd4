"""Ledger schema 5: remote analysts (issue 40). The curator admits an analyst by name with a
token stored only as a salted scrypt hash, the datasets the analyst may ask about and an optional
per-analyst zeta cap on each; every charge records the analyst who asked (None: the curator's own
runs, which every existing charge was).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the tables as revision 0005 created them, written out on purpose (frozen history)
    op.create_table(
        "ledger_analysts",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("token_id", sa.String(32), nullable=False, unique=True),
        sa.Column("token_hash", sa.String(256), nullable=False),
        sa.Column("by", sa.String(256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "ledger_analyst_datasets",
        sa.Column("analyst", sa.String(128), sa.ForeignKey("ledger_analysts.name"),
                  primary_key=True),
        sa.Column("dataset", sa.String(256), sa.ForeignKey("ledger_datasets.name"),
                  primary_key=True),
        sa.Column("zeta", sa.Double),
    )
    op.add_column("ledger_charges", sa.Column("analyst", sa.String(128)))
    meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.execute(meta.update().where(meta.c.key == "schema").values(value="dpcausal-ledger/5"))


def downgrade() -> None:
    raise NotImplementedError("a ledger is never downgraded: it records people's privacy spend")
