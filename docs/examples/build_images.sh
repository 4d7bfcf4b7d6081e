compose/build-offline.sh            # rmqkafka-base:bookworm (once) + wheels + rmqkafka:latest
compose/build-offline.sh --spark    # ... and rmqkafka-spark:latest, for compose's Spark services
