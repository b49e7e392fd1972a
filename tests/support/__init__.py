"""Builders and helpers shared by the tests (imported as ``support.<module>``)."""
