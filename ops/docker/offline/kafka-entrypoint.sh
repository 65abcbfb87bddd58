#!/bin/sh
# server.properties from the KAFKA_* environment (as apache/kafka does), format, start.
set -eu
conf=/opt/kafka/config/server.properties
mkdir -p /opt/kafka/config /var/lib/kafka/data
: >"$conf"
env | grep '^KAFKA_' | while IFS='=' read -r name value; do
    case "$name" in KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_CLUSTER_ID) continue ;; esac
    echo "$(echo "${name#KAFKA_}" | tr 'A-Z_' 'a-z.')=$value" >>"$conf"
done
grep -q '^log.dirs=' "$conf" || echo "log.dirs=/var/lib/kafka/data" >>"$conf"
java -Xmx256m -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format \
    --cluster-id="${KAFKA_CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$conf" --ignore-formatted
exec java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true \
    -cp '/opt/kafka/libs/*' kafka.Kafka "$conf"
