package dev.delayq.interop;

import static dev.delayq.interop.Keys.hex;
import static dev.delayq.interop.Keys.show;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.Redisson;
import org.redisson.api.RBlockingQueue;
import org.redisson.api.RDelayedQueue;
import org.redisson.api.RList;
import org.redisson.api.RScoredSortedSet;
import org.redisson.api.RTopic;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.ByteArrayCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.ScoredEntry;
import org.redisson.config.Config;

/**
 * delayq's DelayedQueue against Redisson's RDelayedQueue over RBlockingQueue (SPEC section 2):
 * Redisson offers and delayq takes, delayq offers and Redisson takes, the read-side calls
 * agree, both schedulers run together, and delayq's offers wake Redisson's scheduler.
 * The delayq side is the {@code delayq} CLI; every test starts its own Redisson client.
 */
@SuppressWarnings("deprecation") // RDelayedQueue is deprecated in Redisson 4 but present: it is what we test against
class RedissonCompatibilityTest {
    /** Far enough in the future that nothing moves during a test. */
    private static final long LONG_DELAY_MS = 600_000;

    private static RedisServer redis;
    private static final AtomicInteger QUEUES = new AtomicInteger();

    private final List<RedissonClient> clients = new ArrayList<>();
    private DelayqCli cli;
    private String testName;

    @BeforeAll
    static void startRedis() throws Exception {
        redis = RedisServer.start();
    }

    @AfterAll
    static void stopRedis() {
        if (redis != null) {
            redis.close();
        }
    }

    @BeforeEach
    void setUp(TestInfo info) {
        cli = new DelayqCli(redis.url());
        testName = info.getTestMethod().map(m -> m.getName()).orElse("test");
    }

    @AfterEach
    void tearDown() {
        cli.close();
        for (RedissonClient c : clients) {
            if (!c.isShutdown()) {
                c.shutdown(0, 5, TimeUnit.SECONDS);
            }
        }
    }

    private RedissonClient redisson() {
        Config config = new Config();
        config.useSingleServer()
                .setAddress(redis.redissonAddress())
                .setTimeout(10_000)
                .setConnectTimeout(10_000);
        RedissonClient client = Redisson.create(config);
        clients.add(client);
        return client;
    }

    private String queueName(String suffix) {
        return "rq-" + testName + "-" + suffix + "-" + QUEUES.incrementAndGet();
    }

    /** Waits until at least n connections are subscribed to the channel of the queue. */
    private static void awaitSubscribers(RedissonClient client, String queue, int n) {
        RTopic topic = client.getTopic(Keys.channel(queue), StringCodec.INSTANCE);
        Await.until(Duration.ofSeconds(30), () -> topic.countSubscribers() >= n,
                () -> "expected " + n + " subscribers on " + Keys.channel(queue) + ", have " + topic.countSubscribers());
    }

    /** Every offered value received exactly once, and none before its due time. */
    private static void assertExactlyOnceAndNeverEarly(Map<String, Long> dueByHex, List<String> receivedHex,
            List<Long> receivedAt) {
        Map<String, Integer> seen = new HashMap<>();
        List<String> problems = new ArrayList<>();
        for (int i = 0; i < receivedHex.size(); i++) {
            String h = receivedHex.get(i);
            seen.merge(h, 1, Integer::sum);
            Long due = dueByHex.get(h);
            if (due == null) {
                problems.add("received a value that was never offered: " + h);
            } else if (receivedAt.get(i) < due) {
                problems.add("received " + (due - receivedAt.get(i)) + " ms before its due time: " + h);
            }
        }
        for (Map.Entry<String, Integer> e : seen.entrySet()) {
            if (e.getValue() > 1) {
                problems.add("received " + e.getValue() + " times: " + e.getKey());
            }
        }
        for (String h : dueByHex.keySet()) {
            if (!seen.containsKey(h)) {
                problems.add("never received: " + h);
            }
        }
        assertTrue(problems.isEmpty(), () -> problems.size() + " problems, first ones: "
                + problems.subList(0, Math.min(10, problems.size())));
        assertEquals(dueByHex.size(), receivedHex.size(), "number of values received");
    }

    @ParameterizedTest
    @EnumSource(Flavor.class)
    void redissonOffersAndDelayqTakesEachValueOnceNeverEarly(Flavor flavor) throws Exception {
        String q = queueName(flavor.name());
        List<byte[]> values = flavor.sampleValues();
        int n = values.size();
        Map<String, Long> earliestDue = new LinkedHashMap<>();

        RedissonClient r = redisson();
        RDelayedQueue<Object> delayed = r.getDelayedQueue(r.getBlockingQueue(q, flavor.codec()));
        for (int i = 0; i < n; i++) {
            long delay = i * 2000L / (n - 1); // 0 .. 2 s
            long before = System.currentTimeMillis();
            delayed.offer(flavor.toRedisson(values.get(i)), delay, TimeUnit.MILLISECONDS);
            earliestDue.put(hex(values.get(i)), before + delay);
        }
        // From here on only delayq moves entries: Redisson's scheduler is gone with its client.
        r.shutdown(0, 5, TimeUnit.SECONDS);
        long waiting = cli.delayed(q);
        long statsDone = System.currentTimeMillis();
        long certainlyWaiting = earliestDue.values().stream().filter(due -> due > statsDone).count();
        assertTrue(waiting >= certainlyWaiting,
                "delayq stats shows " + waiting + " delayed, but " + certainlyWaiting + " are not due yet");
        System.out.printf("%s: %d of %d entries left for delayq's scheduler to move%n", testName, waiting, n);

        DelayqCli.Take take = cli.take(q, n, Duration.ofSeconds(60), flavor.cliBase64());
        List<DelayqCli.Received> got = take.awaitExit(Duration.ofSeconds(90));

        assertExactlyOnceAndNeverEarly(earliestDue, got.stream().map(g -> hex(g.value())).toList(),
                got.stream().map(DelayqCli.Received::atMillis).toList());
        Map<String, Long> stats = cli.stats(q);
        assertEquals(0, stats.get("delayed"), "delayed after all were taken");
        assertEquals(0, stats.get("ready"), "ready after all were taken");
        assertEquals(0, stats.get("corrupt"), "no entry of Redisson's is corrupt to delayq");
    }

    @ParameterizedTest
    @EnumSource(Flavor.class)
    void delayqOffersAndRedissonTakesByteIdenticalValues(Flavor flavor) throws Exception {
        String q = queueName(flavor.name());
        List<byte[]> values = flavor.sampleValues();
        int n = values.size();

        RedissonClient r = redisson();
        RBlockingQueue<Object> destination = r.getBlockingQueue(q, flavor.codec());
        RDelayedQueue<Object> delayed = r.getDelayedQueue(destination); // runs Redisson's transfer task
        awaitSubscribers(r, q, 1);

        Map<String, Long> dueByHex = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
            long delay = (n - 1 - i) * 2000L / (n - 1); // 2 s .. 0: each offer is a new earliest
            long due = cli.offer(q, delay, values.get(i), flavor.cliBase64());
            dueByHex.put(hex(values.get(i)), due);
        }
        // No delayq process runs now (offer runs no scheduler and has exited): Redisson moves them.

        List<String> receivedHex = new ArrayList<>();
        List<Long> receivedAt = new ArrayList<>();
        ExecutorService taker = Executors.newSingleThreadExecutor();
        try {
            Future<Object> first = taker.submit(destination::take); // RBlockingQueue.take()
            Object v = first.get(60, TimeUnit.SECONDS);
            receivedAt.add(System.currentTimeMillis());
            receivedHex.add(hex(flavor.fromRedisson(v)));
        } finally {
            taker.shutdownNow();
        }
        while (receivedHex.size() < n) {
            Object v = destination.poll(30, TimeUnit.SECONDS); // RBlockingQueue.poll(timeout)
            assertNotNull(v, () -> "Redisson received " + receivedHex.size() + " of " + n + " values, then nothing");
            receivedAt.add(System.currentTimeMillis());
            receivedHex.add(hex(flavor.fromRedisson(v)));
        }
        // Values are compared by their exact bytes (hex): byte-identical or not received at all.
        assertExactlyOnceAndNeverEarly(dueByHex, receivedHex, receivedAt);
        assertEquals(0, delayed.size(), "Redisson's size after delivery");
        assertEquals(0, destination.size(), "nothing left in the destination");
        delayed.destroy();
    }

    @ParameterizedTest
    @EnumSource(Flavor.class)
    void sizeContainsRemoveAndReadAllAgreeOnBothSides(Flavor flavor) {
        String q = queueName(flavor.name());
        List<byte[]> values = flavor.sampleValues();
        byte[] a = values.get(0);
        byte[] b = values.get(1);
        byte[] c = values.get(2);
        byte[] d = values.get(3);
        byte[] e = values.get(4);
        byte[] absent = "never offered".getBytes(StandardCharsets.UTF_8);

        RedissonClient r = redisson();
        RDelayedQueue<Object> delayed = r.getDelayedQueue(r.getBlockingQueue(q, flavor.codec()));

        // Entries written by delayq, seen by Redisson.
        for (byte[] v : List.of(a, b, c)) {
            cli.offer(q, LONG_DELAY_MS, v, flavor.cliBase64());
        }
        assertEquals(3, delayed.size(), "Redisson's size() of delayq's entries");
        assertEquals(3, cli.delayed(q), "delayq's count of its own entries");
        for (byte[] v : List.of(a, b, c)) {
            assertTrue(delayed.contains(flavor.toRedisson(v)), () -> "Redisson contains() " + show(v));
        }
        assertFalse(delayed.contains(flavor.toRedisson(absent)), "Redisson contains() of a value never offered");
        assertValues(flavor, List.of(a, b, c), delayed.readAll(), "Redisson readAll() of delayq's entries");

        // Redisson removes an entry that delayq wrote.
        assertTrue(delayed.remove(flavor.toRedisson(b)), "Redisson remove() of a delayq entry");
        assertFalse(delayed.remove(flavor.toRedisson(b)), "a second remove() finds nothing");
        assertFalse(delayed.remove(flavor.toRedisson(absent)), "remove() of a value never offered");
        assertEquals(2, cli.delayed(q), "delayq's count after Redisson removed one");
        assertFalse(delayed.contains(flavor.toRedisson(b)), "removed value is gone for Redisson");
        assertEquals(2, r.getScoredSortedSet(Keys.timeoutSet(q), ByteArrayCodec.INSTANCE).size(),
                "the removed entry left the timeout set too");

        // Entries written by Redisson, seen by delayq.
        delayed.offer(flavor.toRedisson(d), LONG_DELAY_MS, TimeUnit.MILLISECONDS);
        delayed.offer(flavor.toRedisson(e), LONG_DELAY_MS, TimeUnit.MILLISECONDS);
        Map<String, Long> stats = cli.stats(q);
        assertEquals(4, stats.get("delayed"), "delayq's count of Redisson's and its own entries");
        assertEquals(0, stats.get("ready"));
        assertEquals(4, delayed.size(), "Redisson's size()");
        assertValues(flavor, List.of(a, c, d, e), delayed.readAll(), "Redisson readAll() in offer order");

        assertTrue(delayed.remove(flavor.toRedisson(d)), "Redisson remove() of its own entry");
        assertEquals(3, cli.delayed(q), "delayq's count after Redisson removed its own entry");

        // Redisson's peek() and poll() of the waiting entries read delayq's entry at the head.
        assertArrayEquals(a, flavor.fromRedisson(delayed.peek()), "Redisson peek() of delayq's first entry");
        assertArrayEquals(a, flavor.fromRedisson(delayed.poll()), "Redisson poll() of delayq's first entry");
        assertEquals(2, cli.delayed(q), "delayq's count after Redisson polled a waiting entry");
        assertEquals(2, r.getScoredSortedSet(Keys.timeoutSet(q), ByteArrayCodec.INSTANCE).size(),
                "the polled entry left the timeout set too");
        delayed.delete();
        assertEquals(0, cli.delayed(q), "delayq's count after Redisson deleted the queue");
    }

    private static void assertValues(Flavor flavor, List<byte[]> expected, List<Object> actual, String what) {
        assertEquals(expected.stream().map(Keys::hex).toList(),
                actual.stream().map(o -> hex(flavor.fromRedisson(o))).toList(), what);
    }

    @ParameterizedTest(name = "with {0} delayq transfer process(es)")
    @ValueSource(ints = {1, 2})
    void redissonAndDelayqSchedulersTogetherDeliverEachOf2000MessagesOnce(int delayqSchedulers) throws Exception {
        String q = queueName(delayqSchedulers + "x");
        int perSide = 1000;
        RedissonClient r = redisson();
        RBlockingQueue<String> destination = r.getBlockingQueue(q, StringCodec.INSTANCE);
        RDelayedQueue<String> delayed = r.getDelayedQueue(destination); // Redisson's scheduler
        List<Process> schedulers = new ArrayList<>();
        for (int i = 0; i < delayqSchedulers; i++) {
            schedulers.add(cli.transfer(q)); // delayq's schedulers
        }
        awaitSubscribers(r, q, 1 + delayqSchedulers);

        // Collect from the destination while the offers go on.
        List<String> receivedHex = new CopyOnWriteArrayList<>();
        List<Long> receivedAt = new CopyOnWriteArrayList<>();
        AtomicBoolean stop = new AtomicBoolean();
        Thread collector = new Thread(() -> {
            while (!stop.get()) {
                try {
                    String v = destination.poll(500, TimeUnit.MILLISECONDS);
                    if (v != null) {
                        receivedAt.add(System.currentTimeMillis());
                        receivedHex.add(hex(v.getBytes(StandardCharsets.UTF_8)));
                    }
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    if (!stop.get()) {
                        System.err.println("collector: " + e);
                    }
                }
            }
        }, "redisson-collector");
        collector.setDaemon(true);
        collector.start();

        // Half offered by Redisson, half by delayq, interleaved, delays over 0..2 s.
        Random random = new Random(2000);
        List<Runnable> offers = new ArrayList<>();
        Map<String, Long> dueByHex = new ConcurrentHashMap<>();
        for (int i = 0; i < perSide; i++) {
            long redissonDelay = random.nextInt(2001);
            String rv = "from-redisson-" + i;
            offers.add(() -> {
                long before = System.currentTimeMillis();
                delayed.offer(rv, redissonDelay, TimeUnit.MILLISECONDS);
                dueByHex.put(hex(rv.getBytes(StandardCharsets.UTF_8)), before + redissonDelay);
            });
            long delayqDelay = random.nextInt(2001);
            byte[] dv = ("from-delayq-" + i).getBytes(StandardCharsets.UTF_8);
            offers.add(() -> dueByHex.put(hex(dv), cli.offer(q, delayqDelay, dv, false)));
        }
        Collections.shuffle(offers, random);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (Runnable offer : offers) {
                done.add(pool.submit(offer));
            }
            for (Future<?> f : done) {
                f.get(5, TimeUnit.MINUTES);
            }
        } finally {
            pool.shutdownNow();
        }

        try {
            Await.until(Duration.ofMinutes(2), () -> receivedHex.size() >= 2 * perSide,
                    () -> "received " + receivedHex.size() + " of " + 2 * perSide + "; delayed left: " + delayed.size());
            // Every entry has left the delayed set (all were received, each once), so a
            // second copy of any would already be in the destination.
            Await.until(Duration.ofSeconds(30), () -> delayed.size() == 0
                    && r.getScoredSortedSet(Keys.timeoutSet(q), ByteArrayCodec.INSTANCE).size() == 0,
                    () -> "delayed entries left: " + delayed.size());
        } finally {
            stop.set(true);
            collector.join(TimeUnit.SECONDS.toMillis(10));
        }
        assertEquals(0, destination.size(), "values delivered a second time are left in the destination");
        assertExactlyOnceAndNeverEarly(dueByHex, List.copyOf(receivedHex), List.copyOf(receivedAt));
        for (Process p : schedulers) {
            assertTrue(p.isAlive(), "delayq transfer process still running at the end");
        }
        assertEquals(0, cli.stats(q).get("corrupt"), "no entry was corrupt to delayq");
        delayed.destroy();
    }

    @Test
    void delayqOfferWakesRedissonSchedulerThroughTheChannel() throws Exception {
        String q = queueName("wake");
        RedissonClient r = redisson();
        RBlockingQueue<String> destination = r.getBlockingQueue(q, StringCodec.INSTANCE);
        RDelayedQueue<String> delayed = r.getDelayedQueue(destination);
        // Redisson's scheduler has subscribed and found nothing to do: from now on it only
        // wakes on the channel (Redisson has no periodic poll).
        awaitSubscribers(r, q, 1);

        long due = cli.offer(q, 1500, "wake-up".getBytes(StandardCharsets.UTF_8), false);
        String v = destination.poll(30, TimeUnit.SECONDS);
        long at = System.currentTimeMillis();
        assertEquals("wake-up", v, "Redisson's scheduler moved delayq's entry");
        assertTrue(at >= due, "not before its due time");
        long late = at - due;
        System.out.printf("%s: Redisson delivered delayq's entry %d ms after its due time%n", testName, late);
        assertTrue(late < 5_000, "delivered " + late + " ms after due: the channel did not wake Redisson's scheduler");
        delayed.destroy();
    }

    @Test
    void redissonOfferWakesDelayqSchedulerThroughTheChannel() throws Exception {
        String q = queueName("wake");
        // delayq's scheduler alone, with a reconcile pass too rare to matter here.
        Process scheduler = cli.transfer(q, Duration.ofMinutes(10));
        RedissonClient consumer = redisson(); // takes from the destination; runs no scheduler
        RBlockingQueue<String> destination = consumer.getBlockingQueue(q, StringCodec.INSTANCE);
        awaitSubscribers(consumer, q, 1);
        // Once a primer has gone through, delayq's scheduler has made its first passes over
        // the queue and sleeps until the channel wakes it.
        cli.offer(q, 0, "primer".getBytes(StandardCharsets.UTF_8), false);
        assertEquals("primer", destination.poll(60, TimeUnit.SECONDS), "delayq's scheduler is running");

        RedissonClient producer = redisson();
        long before = System.currentTimeMillis();
        long delay = 3000;
        producer.getDelayedQueue(producer.getBlockingQueue(q, StringCodec.INSTANCE))
                .offer("wake-up", delay, TimeUnit.MILLISECONDS);
        producer.shutdown(0, 5, TimeUnit.SECONDS); // Redisson's scheduler goes with it
        long shutDown = System.currentTimeMillis();
        assertTrue(shutDown < before + delay,
                "Redisson's client took " + (shutDown - before) + " ms to shut down: its scheduler may have moved the entry");

        String v = destination.poll(60, TimeUnit.SECONDS);
        long at = System.currentTimeMillis();
        assertEquals("wake-up", v, "delayq's scheduler moved Redisson's entry");
        assertTrue(at >= before + delay, "not before its due time");
        long late = at - (before + delay);
        System.out.printf("%s: delayq delivered Redisson's entry at most %d ms after its due time%n", testName, late);
        assertTrue(late < 5_000, "delivered " + late + " ms after due: the channel did not wake delayq's scheduler");
        assertTrue(scheduler.isAlive(), "delayq transfer still running");
    }

    @Test
    void bothSidesPackEntriesAndAnnounceDueTimesAlike() throws Exception {
        String q = queueName("wire");
        RedissonClient r = redisson();
        RDelayedQueue<byte[]> delayed = r.getDelayedQueue(r.getBlockingQueue(q, ByteArrayCodec.INSTANCE));
        // Our listener on a client of its own: Redisson shares one subscription per channel
        // within a client, decoded with the codec of its scheduler (LongCodec).
        RTopic topic = redisson().getTopic(Keys.channel(q), StringCodec.INSTANCE);
        List<String> announced = new CopyOnWriteArrayList<>();
        topic.addListener(String.class, (channel, msg) -> announced.add(msg));
        awaitSubscribers(r, q, 2); // Redisson's scheduler and our listener

        byte[] fromRedisson = {'r', 0, (byte) 0xff};
        long before = System.currentTimeMillis();
        delayed.offer(fromRedisson, LONG_DELAY_MS, TimeUnit.MILLISECONDS);
        long after = System.currentTimeMillis();
        Await.until(Duration.ofSeconds(10), () -> announced.size() >= 1, () -> "Redisson's offer announced nothing");
        long redissonDue = Long.parseLong(announced.get(0));
        assertTrue(redissonDue >= before + LONG_DELAY_MS && redissonDue <= after + LONG_DELAY_MS,
                "Redisson announces its due time in decimal ms: " + announced.get(0));

        // Earlier than Redisson's entry, so it becomes the earliest and is announced.
        byte[] fromDelayq = {'d', 0, (byte) 0xfe, '\n'};
        long delayqDue = cli.offer(q, LONG_DELAY_MS / 2, fromDelayq, true);
        Await.until(Duration.ofSeconds(10), () -> announced.size() >= 2, () -> "delayq's offer announced nothing");
        assertEquals(String.valueOf(delayqDue), announced.get(1),
                "delayq announces the due time as Redisson does: decimal ms");

        // Both entries packed as struct.pack('Bc0Lc0', #id, id, #value, value), in both keys.
        RScoredSortedSet<byte[]> timeouts = r.getScoredSortedSet(Keys.timeoutSet(q), ByteArrayCodec.INSTANCE);
        RList<byte[]> list = r.getList(Keys.queueList(q), ByteArrayCodec.INSTANCE);
        List<ScoredEntry<byte[]>> entries = new ArrayList<>(timeouts.entryRange(0, -1));
        assertEquals(2, entries.size());
        // Ordered by score: delayq's entry comes due first.
        assertPacked(fromDelayq, entries.get(0).getValue(), "delayq's entry");
        assertEquals(delayqDue, entries.get(0).getScore().longValue(), "delayq's score is its due time");
        assertPacked(fromRedisson, entries.get(1).getValue(), "Redisson's entry");
        assertEquals(redissonDue, entries.get(1).getScore().longValue(), "Redisson's score is its due time");
        List<byte[]> listed = list.readAll(); // offer order: Redisson's first
        assertEquals(2, listed.size());
        assertArrayEquals(entries.get(1).getValue(), listed.get(0), "list holds the same bytes as the set");
        assertArrayEquals(entries.get(0).getValue(), listed.get(1), "list holds the same bytes as the set");
        delayed.delete();
        delayed.destroy();
    }

    private static void assertPacked(byte[] value, byte[] packed, String what) {
        ByteBuffer b = ByteBuffer.wrap(packed).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(8, b.get(), what + ": id length byte");
        b.position(1 + 8);
        assertEquals(value.length, b.getLong(), what + ": value length, u64 little-endian");
        assertEquals(1 + 8 + 8 + value.length, packed.length, what + ": total length");
        assertArrayEquals(value, Arrays.copyOfRange(packed, 17, packed.length), what + ": value bytes");
    }

    @Test
    void queueNameWithHashTagUsesTheSameKeysOnBothSides() throws Exception {
        String q = "{tag-" + QUEUES.incrementAndGet() + "}orders";
        RedissonClient r = redisson();
        RBlockingQueue<String> destination = r.getBlockingQueue(q, StringCodec.INSTANCE);
        RDelayedQueue<String> delayed = r.getDelayedQueue(destination);
        delayed.offer("from-redisson", LONG_DELAY_MS, TimeUnit.MILLISECONDS);
        cli.offer(q, LONG_DELAY_MS, "from-delayq".getBytes(StandardCharsets.UTF_8), false);
        assertEquals(2, cli.delayed(q), "delayq sees Redisson's entry under the same keys");
        assertEquals(2, delayed.size(), "Redisson sees delayq's entry under the same keys");
        assertEquals(2, r.getScoredSortedSet(Keys.timeoutSet(q), ByteArrayCodec.INSTANCE).size(),
                "the timeout set is " + Keys.timeoutSet(q) + ", without added braces");

        delayed.delete();
        cli.offer(q, 0, "due-now".getBytes(StandardCharsets.UTF_8), false);
        assertEquals("due-now", destination.poll(30, TimeUnit.SECONDS), "Redisson moves delayq's entry");
        delayed.offer("due-soon", 100, TimeUnit.MILLISECONDS);
        r.shutdown(0, 5, TimeUnit.SECONDS);
        List<DelayqCli.Received> got = cli.take(q, 1, Duration.ofSeconds(30), false).awaitExit(Duration.ofSeconds(60));
        assertEquals(List.of("due-soon"),
                got.stream().map(g -> new String(g.value(), StandardCharsets.UTF_8)).toList(),
                "delayq takes Redisson's entry");
    }
}
