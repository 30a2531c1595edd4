"""Alembic environment of the ledger: runs on the connection (and transaction) the ledger passes
in ``config.attributes["connection"]``; see :func:`dpcausal.ledger.schema.migrate`."""

from alembic import context

from dpcausal.ledger.schema import VERSION_TABLE, metadata

context.configure(connection=context.config.attributes["connection"], target_metadata=metadata,
                  version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
