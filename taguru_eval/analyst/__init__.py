"""The analyst surface: drift frames, chart builders, the offline HTML report, ingest."""
