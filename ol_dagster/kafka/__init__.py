"""The Kafka intake (``ol-dagster consume``): OpenLineage events read from Kafka topics with a
consumer group, validated as the receiver validates a post, stored before their offsets are
committed. Importing this package needs no Kafka client: only ``consumer`` imports
confluent-kafka (the ``kafka`` extra)."""
