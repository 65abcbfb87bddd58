# An Apache Kafka image from Debian's JRE and the broker jars of ops/kafka (Maven Central),
# standing in for apache/kafka where Docker Hub is out of reach. It reads the same
# KAFKA_* settings as apache/kafka (KAFKA_FOO_BAR → foo.bar) and has
# /opt/kafka/bin/kafka-topics.sh, so docker-compose.yml runs it unchanged.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY libs/ /opt/kafka/libs/
COPY kafka-entrypoint.sh /opt/kafka/bin/entrypoint.sh
COPY kafka-topics.sh /opt/kafka/bin/kafka-topics.sh
EXPOSE 9092
ENTRYPOINT ["/opt/kafka/bin/entrypoint.sh"]
