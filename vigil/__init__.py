"""Vigil: keeps an autonomous agent working 24/7 from one SQLite file."""
