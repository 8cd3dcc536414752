"""PySpark extension for kafkacore (data source "kafkacore", UDF pack).

Not built yet: it arrives with its own issue and will use kafkacore.record.decode_to_arrow
and the storage layout. Importing it today only tells you so."""

__all__: list = []
