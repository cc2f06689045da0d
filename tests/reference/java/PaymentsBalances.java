// Kafka Streams with processing.guarantee=exactly_once_v2 against eoslog: per-account balances from a
// payments topic (keys: account ids, values: amounts as longs), kept in a state store with a changelog
// and written to the balances topic after every payment (no record cache: one output per input).
//
// Run as a single-file program: java -cp '.reference/lib/kafka/*' PaymentsBalances.java BOOTSTRAP STATE_DIR
// It prints "RUNNING" once the application reaches that state, and runs until it is killed.

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public class PaymentsBalances {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "payments-balances");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // Long transactions: a kill -9 almost always finds one open, with writes to abort.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // A killed instance's partitions come back quickly to its restarted self.
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("payments", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey()
            .aggregate(() -> 0L, (account, amount, balance) -> balance + amount,
                       Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("balances-store")
                           .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to("balances", Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) System.out.println("RUNNING");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) stopped.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        stopped.await();
        System.exit(1);
    }
}
