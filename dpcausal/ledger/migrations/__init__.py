"""Alembic migrations of the ledger tables (see dpcausal.ledger.schema.migrate)."""
