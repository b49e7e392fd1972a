"""Outputs for tools a team already watches: OpenTelemetry (:mod:`.otel`) and MLflow
(:mod:`.mlflow`).

Each is an optional extra (``pip install 'taguru_eval[otel]'`` /
``'taguru_eval[mlflow]'``), imported only when asked for: nothing here is
imported by a plain run. Both read a finished run (:class:`taguru_eval.api.Run`),
never the network of the run itself, and are written after the artifact, like
the JUnit report.
"""
