// Kafka's Java clients against a broker: Admin (topics, configs, groups, transactions, producers,
// DeleteRecords), idempotent and transactional producers, read_committed consumers in a classic group,
// sendOffsetsToTransaction with the consumer's group metadata, and a consumer asking for the KIP-848
// "consumer" group protocol. Prints one line per check: "CHECK <name> <result>"; a result is what the
// broker answered (compared by the test against eoslog and Apache Kafka), "ERROR <exception>" otherwise.
//
// Run: java -cp '.reference/lib/kafka/*' ClientsCheck.java BOOTSTRAP

import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ClientsCheck {
    static String bootstrap;

    static String outcome(Supplier<Object> body) {
        try {
            return String.valueOf(body.get());
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException || e.getCause() instanceof ExecutionException
                ? rootCause(e) : e;
            return "ERROR " + t.getClass().getSimpleName();
        }
    }

    static void check(String name, Supplier<Object> body) {
        System.out.println("CHECK " + name + " " + outcome(body));
    }

    /** A read-back after a metadata change: Kafka's brokers learn a created topic or an altered config
     *  from the controller's log a moment after the Admin call returns (its own tests wait for it, as
     *  TestUtils.waitForCondition), so this reads until the answer is {@code settled} or 30 s pass, and
     *  prints the last answer either way: a broker that never gets there still answers differently. */
    static void checkSettled(String name, String settled, Supplier<Object> read) {
        long deadline = System.currentTimeMillis() + 30000;
        String result = outcome(read);
        while (!result.equals(settled) && System.currentTimeMillis() < deadline) {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            result = outcome(read);
        }
        System.out.println("CHECK " + name + " " + result);
    }

    static Throwable rootCause(Throwable e) {
        while (e.getCause() != null && (e instanceof ExecutionException || e instanceof RuntimeException
                                        && !(e instanceof KafkaException))) e = e.getCause();
        return e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
    }

    static <T> T get(KafkaFuture<T> f) {
        try {
            return f.get();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static Properties props(Object... kv) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    static KafkaProducer<String, String> producer(Object... kv) {
        return new KafkaProducer<>(props(kv), new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(Object... kv) {
        return new KafkaConsumer<>(props(kv), new StringDeserializer(), new StringDeserializer());
    }

    static List<String> drain(KafkaConsumer<String, String> c, int atLeast) {
        List<String> values = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30000;
        while (values.size() < atLeast && System.currentTimeMillis() < deadline)
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) values.add(r.value());
        // a little longer: anything past what was expected shows too
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(1000))) values.add(r.value());
        return values;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        TopicPartition data = new TopicPartition("jc-data", 0);
        try (Admin admin = Admin.create(props())) {
            check("create-topics-call", () -> {
                get(admin.createTopics(List.of(new NewTopic("jc-data", 1, (short) 1),
                    new NewTopic("jc-configured", 2, (short) 1).configs(Map.of("retention.ms", "3600000")))).all());
                return "done";
            });
            checkSettled("create-topics", "true",
                () -> new TreeSet<>(get(admin.listTopics().names())).containsAll(List.of("jc-data", "jc-configured")));
            checkSettled("describe-topics", "2", () -> get(admin.describeTopics(List.of("jc-configured")).allTopicNames())
                .get("jc-configured").partitions().size());
            ConfigResource configured = new ConfigResource(ConfigResource.Type.TOPIC, "jc-configured");
            Supplier<Object> retention = () -> {
                ConfigEntry e = get(admin.describeConfigs(List.of(configured)).all()).get(configured).get("retention.ms");
                return e.value() + "/" + e.source();
            };
            checkSettled("describe-configs", "3600000/DYNAMIC_TOPIC_CONFIG", retention);
            check("incremental-alter-configs-call", () -> {
                get(admin.incrementalAlterConfigs(Map.of(configured, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET)))).all());
                return "done";
            });
            checkSettled("incremental-alter-configs", "7200000/DYNAMIC_TOPIC_CONFIG", retention);
            // KIP-467: one batch to a compacted topic, records 0 and 5 without a key. Each record's outcome,
            // in order: the producer fails the named ones with the partition's error and the others as
            // part of a batch with invalid records.
            checkSettled("record-errors-topic", "done", () -> {
                get(admin.createTopics(List.of(new NewTopic("jc-compacted", 1, (short) 1)
                    .configs(Map.of("cleanup.policy", "compact")))).all());
                return "done";
            });
            check("record-errors", () -> {
                try (KafkaProducer<String, String> p = producer("linger.ms", "1000", "retries", "0")) {
                    List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = 0; i < 10; i++)
                        sent.add(p.send(new ProducerRecord<>("jc-compacted", 0, i % 5 == 0 ? null : "k" + i, "v" + i)));
                    p.flush();
                    List<String> outcomes = new ArrayList<>();
                    for (var f : sent) outcomes.add(outcome(() -> {
                        try {
                            return "offset " + f.get().offset();
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    }));
                    return String.join(",", outcomes);
                }
            });
            check("idempotent-produce", () -> {
                try (KafkaProducer<String, String> p = producer("enable.idempotence", "true", "acks", "all")) {
                    long last = -1;
                    for (int i = 0; i < 10; i++) last = p.send(new ProducerRecord<>("jc-data", 0, "k", "plain-" + i)).get().offset();
                    return last;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            check("transactions", () -> {
                try (KafkaProducer<String, String> p = producer("transactional.id", "jc-txn");
                     KafkaConsumer<String, String> c = consumer("group.id", "jc-group", "isolation.level", "read_committed",
                         "auto.offset.reset", "earliest", "enable.auto.commit", "false", "group.protocol", "classic")) {
                    c.subscribe(List.of("jc-data"));
                    List<String> read = drain(c, 10);
                    p.initTransactions();
                    p.beginTransaction();
                    for (String v : read) p.send(new ProducerRecord<>("jc-configured", 0, "k", "copy-" + v));
                    p.sendOffsetsToTransaction(Map.of(data, new OffsetAndMetadata(c.position(data))), c.groupMetadata());
                    p.commitTransaction();
                    p.beginTransaction();
                    for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>("jc-configured", 0, "k", "aborted-" + i));
                    p.flush();
                    p.abortTransaction();
                    return read.size() + " read, committed offset " + c.committed(Set.of(data)).get(data).offset();
                }
            });
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                check("read-" + isolation, () -> {
                    try (KafkaConsumer<String, String> c = consumer("isolation.level", isolation)) {
                        TopicPartition tp = new TopicPartition("jc-configured", 0);
                        c.assign(List.of(tp));
                        c.seekToBeginning(List.of(tp));
                        List<String> values = drain(c, isolation.equals("read_committed") ? 10 : 13);
                        return values.size() + " " + values.stream().filter(v -> v.startsWith("aborted")).count()
                            + " aborted, end " + c.endOffsets(List.of(tp)).get(tp);
                    }
                });
            }
            check("consumer-groups", () -> {
                boolean listed = get(admin.listConsumerGroups().all()).stream().anyMatch(g -> g.groupId().equals("jc-group"));
                ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of("jc-group")).all()).get("jc-group");
                long offset = get(admin.listConsumerGroupOffsets("jc-group").partitionsToOffsetAndMetadata()).get(data).offset();
                return listed + " " + d.groupState() + " " + d.members().size() + " offset " + offset;
            });
            check("transactions-admin", () -> {
                boolean listed = get(admin.listTransactions().all()).stream().anyMatch(t -> t.transactionalId().equals("jc-txn"));
                TransactionDescription d = get(admin.describeTransactions(List.of("jc-txn")).all()).get("jc-txn");
                int producers = get(admin.describeProducers(List.of(new TopicPartition("jc-configured", 0))).all())
                    .get(new TopicPartition("jc-configured", 0)).activeProducers().size();
                return listed + " " + d.state() + " " + d.topicPartitions().size() + " producers " + producers;
            });
            check("delete-records", () -> {
                long low = get(admin.deleteRecords(Map.of(data, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(data)).lowWatermark();
                try (KafkaConsumer<String, String> c = consumer()) {
                    return low + " beginning " + c.beginningOffsets(List.of(data)).get(data);
                }
            });
            check("consumer-group-protocol", () -> {
                // From the earliest offset: a new group at the latest one had nothing to read and
                // waited out drain's 30 s on both brokers.
                try (KafkaConsumer<String, String> c = consumer("group.id", "jc-848", "group.protocol", "consumer",
                                                                "auto.offset.reset", "earliest")) {
                    c.subscribe(List.of("jc-data"));
                    return "consumed " + drain(c, 8).size();
                }
            });
        }
    }
}
