// Kafka 4.4's Java consumer with group.protocol=consumer (KIP-848) against a broker: members join and
// leave while a producer keeps writing, each record committed (commitSync) before the next poll; then a
// static member's rejoin and a regular expression subscription (SubscriptionPattern, RE2/J) that picks up
// a topic created later. Prints one line per event for the test to judge:
//   ASSIGNED <member> <t> <topic-partition,...>   REVOKED <member> <t> <...>   RECORD <member> <t> <topic> <partition> <value>
//   SENT <count>   ERROR <member> <exception>
// <t> is System.nanoTime(); the test orders events by it.
//
// Run: java -cp '.reference/lib/kafka/*' ConsumerProtocolCheck.java BOOTSTRAP SCENARIO(flow|static|regex)

import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConsumerProtocolCheck {
    static String bootstrap;

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String parts(Collection<TopicPartition> ps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition p : ps) out.add(p.topic() + ":" + p.partition());
        Collections.sort(out);
        return out.isEmpty() ? "-" : String.join(",", out);
    }

    /** A consumer on a thread of its own, committing each record before the next poll. */
    static class Member extends Thread {
        final String name, group, instance;
        final List<String> topics;
        final String pattern;
        final AtomicBoolean stop = new AtomicBoolean();
        final Set<TopicPartition> owned = Collections.synchronizedSet(new HashSet<>());
        final AtomicInteger records = new AtomicInteger();

        Member(String name, String group, String instance, List<String> topics, String pattern) {
            this.name = name; this.group = group; this.instance = instance; this.topics = topics; this.pattern = pattern;
        }

        public void run() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("group.protocol", "consumer");
            p.put("client.id", name);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            if (instance != null) p.put("group.instance.id", instance);
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                        owned.removeAll(ps);
                        say("REVOKED " + name + " " + System.nanoTime() + " " + parts(ps));
                    }
                    public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                        owned.addAll(ps);
                        say("ASSIGNED " + name + " " + System.nanoTime() + " " + parts(ps));
                    }
                };
                if (pattern != null) c.subscribe(new SubscriptionPattern(pattern), listener);
                else c.subscribe(topics, listener);
                while (!stop.get()) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        say("RECORD " + name + " " + System.nanoTime() + " " + r.topic() + " " + r.partition() + " "
                            + r.value());
                        records.incrementAndGet();
                        c.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                                            new OffsetAndMetadata(r.offset() + 1)));
                    }
                }
            } catch (Exception e) {
                say("ERROR " + name + " " + e);
            }
        }

        void close() throws InterruptedException {
            stop.set(true);
            join(60000);
        }
    }

    static void await(String what, java.util.function.BooleanSupplier done) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 120000;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("gave up waiting for " + what);
            Thread.sleep(50);
        }
    }

    static void create(String topic, int partitions) throws Exception {
        try (Admin a = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
    }

    static KafkaProducer<String, String> producer() {
        return new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap, "key.serializer",
            StringSerializer.class.getName(), "value.serializer", StringSerializer.class.getName()));
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        switch (args[1]) {
            case "flow" -> flow();
            case "static" -> statics();
            case "regex" -> regex();
            default -> throw new IllegalArgumentException(args[1]);
        }
    }

    static void flow() throws Exception {
        String topic = "jcp-flow", group = "jcp-flow-group";
        create(topic, 6);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger sent = new AtomicInteger();
        Thread feed = new Thread(() -> {
            try (KafkaProducer<String, String> p = producer()) {
                while (!stop.get()) {
                    String v = String.valueOf(sent.get());
                    p.send(new ProducerRecord<>(topic, v, v));
                    sent.incrementAndGet();
                    Thread.sleep(4);
                }
                p.flush();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        });
        feed.start();
        Member m1 = new Member("m1", group, null, List.of(topic), null);
        m1.start();
        await("m1 consuming", () -> m1.records.get() > 50);
        Member m2 = new Member("m2", group, null, List.of(topic), null);
        say("JOINING m2 " + System.nanoTime());
        m2.start();
        await("m2 consuming", () -> m2.records.get() > 20);
        Member m3 = new Member("m3", group, null, List.of(topic), null);
        m3.start();
        await("m3 consuming", () -> m3.records.get() > 20);
        m1.close();
        await("m1's partitions taken over", () -> m2.owned.size() + m3.owned.size() == 6);
        m2.close();
        await("m3 holding every partition", () -> m3.owned.size() == 6);
        stop.set(true);
        feed.join();
        say("SENT " + sent.get());
        int total = sent.get();
        await("every record consumed", () -> m1.records.get() + m2.records.get() + m3.records.get() >= total);
        m3.close();
    }

    static void statics() throws Exception {
        String topic = "jcp-static", group = "jcp-static-group";
        create(topic, 4);
        Member a = new Member("a", group, "inst-a", List.of(topic), null);
        Member b = new Member("b", group, "inst-b", List.of(topic), null);
        a.start();
        b.start();
        await("two each", () -> a.owned.size() == 2 && b.owned.size() == 2);
        Set<TopicPartition> before = new HashSet<>(b.owned);
        say("CLOSING b " + System.nanoTime());
        b.close();
        say("CLOSED b " + System.nanoTime());
        Member b2 = new Member("b2", group, "inst-b", List.of(topic), null);
        b2.start();
        await("b2 back on b's partitions", () -> b2.owned.equals(before));
        say("BACK b2 " + System.nanoTime());
        a.close();
        b2.close();
    }

    static void regex() throws Exception {
        String group = "jcp-regex-group";
        create("jrx-first", 2);
        Member m = new Member("rx", group, null, List.of(), "jrx-.*");
        m.start();
        await("the first topic", () -> m.owned.size() == 2);
        create("jrx-second", 2);
        create("jother", 1);
        await("the new topic", () -> m.owned.size() == 4);
        try (KafkaProducer<String, String> p = producer()) {
            p.send(new ProducerRecord<>("jrx-second", "late", "late")).get();
        }
        await("the new topic's record", () -> m.records.get() >= 1);
        m.close();
    }
}
