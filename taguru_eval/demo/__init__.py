"""The bundled demo: one run, or a history of runs over a corpus that changes between them."""
