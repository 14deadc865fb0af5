"""Adapters for the engines ngramdraft drafts for; each imports its engine lazily."""
