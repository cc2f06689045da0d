// One case of bench/transactions.py driven by Kafka's Java producer (--client java): the producer
// Kafka 4.4's users run, which speaks transaction version 2 (KIP-890 part 2) whenever the broker
// finalizes transaction.version >= 2, and version 1 otherwise. The same cycle as the librdkafka
// driver: begin -> send for N ms -> flush() -> commitTransaction(), until the seconds are up
// ("txn"); the idempotent producer sending throughout ("idempotent") or flushing every N ms
// without a transaction ("flush"). After the clock, a transactional case runs one aborted
// transaction of abort-probe records per partition with a value of its own (the Python side then
// checks that a read_committed reader never sees it).
//
// Records: RECORD_SIZE-byte values (given in hex, so the Python side knows them), no key, CHUNK at a
// time to each partition in turn. Before the clock: initTransactions() and a committed warm-up of
// WARMUP_S seconds sent to TOPIC-warmup (the JIT compiles the send path; connections and the
// producer id are in place), outside any figure.
//
// stdout, one line each: "CLOCK start" and "CLOCK end" as the clock starts and stops (the Python
// side counts the broker's CPU between them), then "RESULT {json}".
//
// Run: java -cp '.reference/lib/kafka/*:CLASSES' TransactionalProduce BOOTSTRAP TOPIC MODE INTERVAL_MS
//      SECONDS WARMUP_S PARTITIONS CHUNK VALUE_HEX ABORT_HEX ABORT_PROBE TRANSACTIONAL_ID [KEY=VALUE ...]
// (the KEY=VALUE pairs are the producer's settings)

import java.lang.management.ManagementFactory;
import java.util.*;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TransactionalProduce {
    static final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    static final AtomicLong failedSends = new AtomicLong();
    static final Callback onSend = (meta, e) -> {
        if (e != null) {
            failedSends.incrementAndGet();
            if (errors.size() < 20) errors.add(e.toString());
        }
    };

    static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime() / 1e9;
    }

    static String json(List<Double> xs) {
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (double x : xs) j.add(String.format(Locale.ROOT, "%.5f", x));
        return j.toString();
    }

    static String jsonStrings(List<String> xs) {
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (String x : xs) j.add("\"" + x.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"");
        return j.toString();
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1], mode = a[2];
        long intervalNs = Long.parseLong(a[3]) * 1_000_000L;
        double seconds = Double.parseDouble(a[4]), warmupS = Double.parseDouble(a[5]);
        int partitions = Integer.parseInt(a[6]), chunk = Integer.parseInt(a[7]);
        byte[] value = hex(a[8]), abortValue = hex(a[9]);
        int abortProbe = Integer.parseInt(a[10]);
        boolean transactional = mode.equals("txn");

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = 12; i < a.length; i++) {  // the producer settings, KEY=VALUE
            int eq = a[i].indexOf('=');
            p.put(a[i].substring(0, eq), a[i].substring(eq + 1));
        }
        if (transactional) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a[11]);

        long[] committed = new long[partitions];
        long aborted = 0, markers = 0;
        boolean exact = true;
        List<Double> commits = new ArrayList<>(), flushes = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        int cycles = 0, failed = 0;
        double elapsed, clientCpu, warmed;

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            long w0 = System.nanoTime();
            if (transactional) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            long warmEnd = w0 + (long) (warmupS * 1e9);
            int next = 0;
            do {
                for (int i = 0; i < chunk; i++) producer.send(new ProducerRecord<>(topic + "-warmup", next, null, value), onSend);
                next = (next + 1) % partitions;
            } while (System.nanoTime() < warmEnd);
            producer.flush();
            if (transactional) producer.commitTransaction();
            if (failedSends.get() > 0) throw new IllegalStateException("warm-up not delivered: " + errors);
            warmed = (System.nanoTime() - w0) / 1e9;

            next = 0;
            System.out.println("CLOCK start");
            System.out.flush();
            double cpu0 = cpuSeconds();
            long start = System.nanoTime(), deadline = start + (long) (seconds * 1e9), end = start;
            if (mode.equals("idempotent")) {
                while (System.nanoTime() < deadline) {
                    for (int i = 0; i < chunk; i++) producer.send(new ProducerRecord<>(topic, next, null, value), onSend);
                    committed[next] += chunk;
                    next = (next + 1) % partitions;
                }
                producer.flush();
                end = System.nanoTime();
                if (failedSends.get() > 0) throw new IllegalStateException(failedSends.get() + " records failed: " + errors);
            } else {
                while (end < deadline) {
                    if (transactional) producer.beginTransaction();
                    long begun = System.nanoTime();
                    long[] inTxn = new long[partitions];
                    do {
                        for (int i = 0; i < chunk; i++) producer.send(new ProducerRecord<>(topic, next, null, value), onSend);
                        inTxn[next] += chunk;
                        next = (next + 1) % partitions;
                    } while (System.nanoTime() - begun < intervalNs);
                    long flushing = System.nanoTime();
                    producer.flush();
                    long committing = System.nanoTime();
                    String error = null;
                    if (transactional) {
                        try {
                            producer.commitTransaction();
                        } catch (ProducerFencedException e) {
                            throw e;
                        } catch (KafkaException e) {
                            error = e.toString();
                            producer.abortTransaction();
                        }
                        for (long n : inTxn) if (n > 0) markers++;
                    } else if (failedSends.get() > 0) {
                        throw new IllegalStateException(failedSends.get() + " records failed: " + errors);
                    }
                    end = System.nanoTime();
                    if (error == null) {
                        for (int i = 0; i < partitions; i++) committed[i] += inTxn[i];
                        flushes.add((committing - flushing) / 1e9);
                        if (transactional) commits.add((end - committing) / 1e9);
                        cycles++;
                    } else {
                        exact = false;  // some of its records may have failed before reaching the log
                        for (long n : inTxn) aborted += n;
                        failed++;
                        if (failures.size() < 20) failures.add(error);
                    }
                }
            }
            clientCpu = cpuSeconds() - cpu0;
            elapsed = (end - start) / 1e9;
            System.out.println("CLOCK end");
            System.out.flush();
            if (transactional) {
                producer.beginTransaction();
                for (int part = 0; part < partitions; part++)
                    for (int i = 0; i < abortProbe; i++) producer.send(new ProducerRecord<>(topic, part, null, abortValue));
                producer.flush();
                producer.abortTransaction();
                aborted += (long) abortProbe * partitions;
                markers += partitions;
            }
        }
        StringJoiner perPartition = new StringJoiner(",", "[", "]");
        for (long n : committed) perPartition.add(Long.toString(n));
        System.out.println("RESULT {\"committed\":" + perPartition + ",\"aborted\":" + aborted + ",\"markers\":" + markers
            + ",\"exact\":" + exact + ",\"cycles\":" + cycles + ",\"failed_transactions\":" + failed
            + ",\"failures\":" + jsonStrings(failures) + ",\"seconds\":" + String.format(Locale.ROOT, "%.6f", elapsed)
            + ",\"client_cpu_s\":" + String.format(Locale.ROOT, "%.3f", clientCpu)
            + ",\"warmup_s\":" + String.format(Locale.ROOT, "%.3f", warmed)
            + ",\"commit_s\":" + json(commits) + ",\"flush_s\":" + json(flushes)
            + ",\"client_errors\":" + jsonStrings(errors) + "}");
    }
}
