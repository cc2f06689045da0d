// Kafka's broker and topic config definitions, read from the reference jars (scripts/kafka_configs.py runs
// this and writes src/eoslog/kafka_configs.py from its output; tests/unit/test_kafka_configs.py runs it to
// hold eoslog's DescribeConfigs against Kafka's). One JSON object per line:
//   {"kind": "broker", "name": ..., "type": ..., "default": ... or null, "dynamic": true|false}
//   {"kind": "topic", "name": ..., "type": ..., "default": ..., "synonyms": [broker names, in Kafka's order]}
// Internal configs are left out, as Kafka's DescribeConfigs leaves them out.
//
// Run: java -cp '.reference/lib/kafka/*' scripts/KafkaConfigs.java

import java.util.*;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;
import org.apache.kafka.server.config.ServerTopicConfigSynonyms;
import org.apache.kafka.storage.internals.log.LogConfig;

public class KafkaConfigs {
    static String quote(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String defaultOf(ConfigDef.ConfigKey key) {
        if (!key.hasDefault() || key.defaultValue == null) return null;
        return ConfigDef.convertToString(key.defaultValue, key.type);
    }

    public static void main(String[] args) {
        Set<String> dynamic = DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS;
        for (ConfigDef.ConfigKey key : new TreeMap<>(AbstractKafkaConfig.CONFIG_DEF.configKeys()).values()) {
            if (key.internalConfig) continue;
            System.out.println("{\"kind\": \"broker\", \"name\": " + quote(key.name) + ", \"type\": " + quote(key.type.name())
                + ", \"default\": " + quote(defaultOf(key)) + ", \"dynamic\": " + dynamic.contains(key.name) + "}");
        }
        Map<String, ConfigDef.ConfigKey> topic = LogConfig.configDefCopy().configKeys();
        for (String name : new TreeSet<>(LogConfig.nonInternalConfigNames())) {
            ConfigDef.ConfigKey key = topic.get(name);
            List<String> synonyms = new ArrayList<>();
            for (var s : ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS.getOrDefault(name, List.of())) synonyms.add(quote(s.name()));
            System.out.println("{\"kind\": \"topic\", \"name\": " + quote(name) + ", \"type\": " + quote(key.type.name())
                + ", \"default\": " + quote(defaultOf(key)) + ", \"synonyms\": [" + String.join(", ", synonyms) + "]}");
        }
    }
}
