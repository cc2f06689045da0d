// Kafka's Java producer or consumer at full speed under a byte-rate quota (tests/interop/test_quotas.py):
// it runs for WARMUP seconds (a quota lets its first windows' worth through at once), then counts
// the record bytes acknowledged (produce) or received (consume) for MEASURE seconds and prints
// "RATE <bytes per second>" and "THROTTLED <ms>", the throttle time the broker reported.
//
//   java -cp <kafka jars> QuotaRate.java produce|consume BOOTSTRAP TOPIC CLIENT_ID WARMUP MEASURE

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class QuotaRate {
    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2], clientId = args[3];
        long warmupMs = Long.parseLong(args[4]) * 1000, measureMs = Long.parseLong(args[5]) * 1000;
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        long start = System.currentTimeMillis();
        long from = start + warmupMs, until = from + measureMs;
        long bytes = 0;
        double throttle = 0;
        if (mode.equals("produce")) {
            p.put("key.serializer", ByteArraySerializer.class.getName());
            p.put("value.serializer", ByteArraySerializer.class.getName());
            p.put("linger.ms", "5");
            AtomicLong acked = new AtomicLong();
            AtomicLong ackedAtFrom = new AtomicLong(-1);
            byte[] value = new byte[1000];
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
            try {
                while (System.currentTimeMillis() < until) {
                    producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                        if (e == null) acked.addAndGet(value.length);
                    });
                    if (ackedAtFrom.get() < 0 && System.currentTimeMillis() >= from) ackedAtFrom.set(acked.get());
                }
                bytes = acked.get() - ackedAtFrom.get();
                throttle = metric(producer.metrics(), "produce-throttle-time-max");
            } finally {
                // What is still buffered (up to buffer.memory, a minute at the quota) was never
                // meant to be measured: drop it rather than send it at the quota's pace.
                producer.close(Duration.ZERO);
            }
        } else {
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            p.put("enable.auto.commit", "false");
            p.put("max.partition.fetch.bytes", "16384");
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                long now;
                while ((now = System.currentTimeMillis()) < until) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        if (now >= from) bytes += r.serializedValueSize() + Math.max(r.serializedKeySize(), 0);
                    }
                }
                throttle = metric(consumer.metrics(), "fetch-throttle-time-max");
            }
        }
        System.out.println("RATE " + (bytes * 1000 / measureMs));
        System.out.println("THROTTLED " + (long) throttle);
    }

    static double metric(java.util.Map<MetricName, ? extends Metric> metrics, String name) {
        for (var e : metrics.entrySet()) {
            if (e.getKey().name().equals(name)) {
                Object v = e.getValue().metricValue();
                if (v instanceof Double d && !d.isNaN()) return d;
            }
        }
        return 0;
    }
}
