package eoslog.connect;

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A source connector for tests/reference/test_kafka_connect_eos.py: one task copies the lines of a
 * file into a topic, its source offset being the number of lines already copied. It supports
 * exactly-once delivery (KIP-618) the way Kafka's FileStreamSourceConnector does: the file only
 * grows, so a line number names the same line forever.
 */
public class LinesSourceConnector extends SourceConnector {
    static final ConfigDef CONFIG = new ConfigDef()
        .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file whose lines are copied")
        .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic they are copied to")
        .define("lines.per.poll", ConfigDef.Type.INT, 20, ConfigDef.Importance.LOW, "lines returned by one poll")
        .define("poll.pause.ms", ConfigDef.Type.INT, 5, ConfigDef.Importance.LOW, "pause before each poll");

    private Map<String, String> props;

    @Override public void start(Map<String, String> props) { this.props = props; }
    @Override public Class<? extends Task> taskClass() { return LinesSourceTask.class; }
    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }
    @Override public void stop() { }
    @Override public ConfigDef config() { return CONFIG; }
    @Override public String version() { return "1"; }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> props) {
        return ExactlyOnceSupport.SUPPORTED;
    }
}
