"""The run's tables: their schemas, the lane-output shapes, and the step between them.

:mod:`.schemas` declares every table once (name -> Polars schema; the Arrow
schemas, Parquet file names and empty frames derive from it), :mod:`.shapes`
the nested lane-output shapes (exactly evaluation.json's; their key orders and
nested dtypes derive from them through :mod:`.derive`), and :mod:`.flatten`
turns lane outputs into the flat tables."""
