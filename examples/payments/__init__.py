"""The payments pipeline run by ``examples/payments_pipeline.py`` (``./scripts/main.sh``).

``events`` (the event format and the validation rules), ``upstream`` (the service writing
payments in transactions), ``job`` (the Spark job), ``verify`` (the independent check).
"""
