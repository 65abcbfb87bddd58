#!/bin/sh
exec java -Xmx128m -cp '/opt/kafka/libs/*' org.apache.kafka.tools.TopicCommand "$@"
