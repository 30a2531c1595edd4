"""Ledger schema revisions, oldest first (0001: schema 1 of main 7ea6ad1)."""
