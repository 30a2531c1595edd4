"""Ledger schema 1 (dpcausal-ledger/1, main 7ea6ad1): datasets, caps, charges.

Ledgers written before migrations existed hold exactly these tables and are stamped at this
revision on first open, then upgraded.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    meta = op.create_table(
        "ledger_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(256), nullable=False),
    )
    op.create_table(
        "ledger_datasets",
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("cap_kind", sa.String(16), nullable=False),
        sa.Column("cap_value", sa.Double, nullable=False),
        sa.Column("cap_delta", sa.Double, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "ledger_charges",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("release_id", sa.String(512), nullable=False, unique=True),
        sa.Column("dataset", sa.String(256), sa.ForeignKey("ledger_datasets.name"),
                  nullable=False, index=True),
        sa.Column("mechanism", sa.String(16), nullable=False),
        sa.Column("zeta", sa.Double),
        sa.Column("epsilon", sa.Double),
        sa.Column("delta", sa.Double, nullable=False),
        sa.Column("rdp_orders", sa.Text),
        sa.Column("rdp_epsilons", sa.Text),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("run_url", sa.Text),
        sa.Column("result", sa.Text),
        sa.Column("reserved_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
    )
    op.bulk_insert(meta, [{"key": "schema", "value": "dpcausal-ledger/1"}])


def downgrade() -> None:
    raise NotImplementedError("a ledger is never dropped: it records people's privacy spend")
