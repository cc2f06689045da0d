package eoslog.connect;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * Copies the file's lines (written whole before the connector starts) from the committed source
 * offset on: {"line": n} after the n-th line.
 * With exactly-once support the worker commits each poll's records and their offset in one
 * transaction, so after a crash the task resumes where the last committed transaction ended.
 */
public class LinesSourceTask extends SourceTask {
    private Map<String, String> partition;
    private String topic;
    private int perPoll;
    private int pauseMs;
    private RandomAccessFile in;
    private long line;

    @Override public String version() { return "1"; }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(LinesSourceConnector.CONFIG, props);
        String file = config.getString("file");
        topic = config.getString("topic");
        perPoll = config.getInt("lines.per.poll");
        pauseMs = config.getInt("poll.pause.ms");
        partition = Map.of("file", file);
        Map<String, Object> offset = context.offsetStorageReader().offset(partition);
        long done = offset == null ? 0 : ((Number) offset.get("line")).longValue();
        try {
            in = new RandomAccessFile(file, "r");
            for (line = 0; line < done; line++) {
                if (in.readLine() == null) throw new ConnectException("the file has fewer lines than the offset " + done);
            }
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        Thread.sleep(pauseMs);
        List<SourceRecord> records = new ArrayList<>();
        try {
            String raw;
            while (records.size() < perPoll && (raw = in.readLine()) != null) {
                line++;
                String value = new String(raw.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
                records.add(new SourceRecord(partition, Map.of("line", line), topic, 0, null, null,
                                             Schema.STRING_SCHEMA, value));
            }
        } catch (IOException e) {
            throw new ConnectException(e);
        }
        return records.isEmpty() ? null : records;
    }

    @Override
    public void stop() {
        try {
            if (in != null) in.close();
        } catch (IOException e) {
            // closing a file we only read
        }
    }
}
