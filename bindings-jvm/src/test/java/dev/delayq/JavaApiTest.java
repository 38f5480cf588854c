package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The API as a plain Java caller sees it: blocking calls, CompletableFutures, checked-free exceptions. */
@ExtendWith(RedisExtension.class)
class JavaApiTest {
    @Test
    void blockingCallsFromJava(RedisServer redis) {
        try (Client client = Client.connect(redis.getUrl());
                DelayedQueue queue = client.delayedQueue(RedisServer.Companion.uniqueName("java"))) {
            long before = client.serverTimeMs();
            long due = queue.offer("hello", Duration.ofMillis(200));
            assertTrue(due >= before + 200);
            queue.offer("bytes".getBytes(StandardCharsets.UTF_8), Duration.ofHours(1));
            List<Long> dues = queue.offerAll(List.of(new Offer("a", Duration.ofHours(1)), new Offer("b", Duration.ofHours(2))));
            assertEquals(2, dues.size());
            assertEquals(4L, queue.size());
            assertTrue(queue.contains("a"));
            assertTrue(queue.remove("a"));
            assertEquals(3, queue.readAll().size());
            byte[] value = queue.take(Duration.ofSeconds(10));
            assertArrayEquals("hello".getBytes(StandardCharsets.UTF_8), value);
            assertTrue(client.serverTimeMs() >= due);
            assertEquals(new DelayedStats(2, 0, 0), queue.stats());
            queue.clear();
            assertNull(queue.poll());
            assertNull(queue.take(Duration.ofMillis(50)));
        }
    }

    @Test
    void completableFuturesFromJava(RedisServer redis) throws Exception {
        Client client = Client.connectAsync(redis.getUrl()).get(10, TimeUnit.SECONDS);
        try (client; DelayedQueue queue = client.delayedQueue(RedisServer.Companion.uniqueName("java"))) {
            CompletableFuture<byte[]> taking = queue.takeAsync(Duration.ofSeconds(10));
            queue.offerAsync("async", Duration.ZERO).thenCompose(d -> queue.sizeAsync()).get(10, TimeUnit.SECONDS);
            assertEquals("async", new String(taking.get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8));
            CompletableFuture<Void> cleared = queue.clearAsync();
            assertNull(cleared.get(10, TimeUnit.SECONDS));
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> queue.offerAsync("x", Duration.ofSeconds(-1)).get());
            assertInstanceOf(InvalidArgumentException.class, e.getCause());
        }
    }

    @Test
    void exceptionsFromJava(RedisServer redis) {
        Client client = Client.connect(redis.getUrl());
        DelayedQueue queue = client.delayedQueue(RedisServer.Companion.uniqueName("java"));
        DelayqException bad = assertThrows(InvalidArgumentException.class, () -> queue.offer("x", Duration.ofMillis(-5)));
        assertEquals("invalid_argument", bad.getKind());
        client.close();
        assertThrows(ClosedException.class, () -> queue.offer("x", Duration.ZERO));
        assertThrows(DelayqException.class, queue::poll);
    }

    @Test
    void reliableQueueFromJava(RedisServer redis) throws Exception {
        ReliableQueueOptions options = new ReliableQueueOptions()
                .withVisibilityTimeout(Duration.ofSeconds(30))
                .withMaxAttempts(2)
                .withBackoff(Backoff.schedule(Duration.ofMillis(10), Duration.ofMillis(20)));
        try (Client client = Client.connect(redis.getUrl());
                ReliableQueue jobs = client.reliableQueue(RedisServer.Companion.uniqueName("java-rq"), options)) {
            String id = jobs.offer("charge card 42", Duration.ZERO, "invoice-42");
            assertEquals("invoice-42", id);
            assertEquals("invoice-42", jobs.offer("again", Duration.ZERO, "invoice-42"));
            assertTrue(jobs.offer("generated".getBytes(StandardCharsets.UTF_8), Duration.ofHours(1)).length() > 0);
            Delivery d = jobs.receive(Duration.ofSeconds(10));
            assertEquals("invoice-42", d.getId());
            assertEquals("charge card 42", d.payloadString());
            assertEquals(1, d.getAttempt());
            assertTrue(d.nack());
            Delivery second = jobs.receive(Duration.ofSeconds(10));
            assertEquals(2, second.getAttempt());
            assertTrue(second.nack(Duration.ZERO));
            assertEquals(new ReliableStats(1, 0, 0, 1), jobs.stats());
            List<DeadLetter> dead = jobs.deadLetters(10);
            assertEquals("invoice-42", dead.get(0).getId());
            assertEquals(1L, jobs.requeueDead(List.of("invoice-42")));

            // consume with a Java lambda that may throw checked exceptions
            CompletableFuture<Void> running = jobs.consumeAsync(delivery -> {
                if (delivery.payloadString().isEmpty()) throw new Exception("empty payload");
                delivery.getId();
            }, 2);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!jobs.stats().equals(new ReliableStats(1, 0, 0, 0))) {
                assertTrue(System.nanoTime() < deadline, "consume did not ack: " + jobs.stats());
                Thread.onSpinWait();
            }
            jobs.close();
            assertNull(running.get(10, TimeUnit.SECONDS), "a CompletableFuture<Void> completes with null");
            assertThrows(ClosedException.class, jobs::stats);
        }
    }

    @Test
    void reliableWorkloadsFromJava(RedisServer redis) throws Exception {
        String name = RedisServer.Companion.uniqueName("java-rw");
        ReliableQueueOptions options = new ReliableQueueOptions()
                .withVisibilityTimeout(Duration.ofSeconds(20))
                .withIdempotencyRetention(Duration.ofMinutes(1));
        try (Client client = Client.connect(redis.getUrl());
                ReliableQueue jobs = client.reliableQueue(name, options)) {
            // The first handle to make a call stores what it names (and the defaults for the rest).
            assertEquals(new ReliableStats(0, 0, 0, 0), jobs.stats());
            ReliableSettings settings = client.reliableQueue(name).settings();
            assertEquals(Duration.ofSeconds(20), settings.getVisibilityTimeout());
            assertEquals(5, settings.getMaxAttempts());
            assertEquals(Backoff.exponential(), settings.getBackoff());
            assertEquals(Duration.ofMinutes(1), settings.getIdempotencyRetention());
            assertNull(settings.getDeadLetterRetention());
            assertThrows(InvalidArgumentException.class,
                    () -> client.reliableQueue(name, new ReliableQueueOptions().withMaxAttempts(7)).stats());

            OfferOutcome first = jobs.offerWithOutcome("charge", Duration.ZERO, "invoice-7");
            assertEquals(new OfferOutcome("invoice-7", true, first.getDueAt()), first);
            assertNotNull(first.getDueAt());
            assertFalse(jobs.offerWithOutcome("charge", Duration.ZERO, "invoice-7").getCreated());
            List<OfferOutcome> outs = jobs.offerAllWithOutcome(List.of(new ReliableOffer("a", Duration.ZERO), new ReliableOffer("b", Duration.ZERO, "invoice-7")));
            assertTrue(outs.get(0).getCreated());
            assertFalse(outs.get(1).getCreated());

            List<Delivery> got = new ArrayList<>();
            while (got.size() < 2) got.addAll(jobs.receiveMany(10, Duration.ofSeconds(5)));
            Delivery d = got.get(0);
            long before = d.getDeadline();
            assertTrue(d.extend(Duration.ofMinutes(1)));
            assertTrue(d.getDeadline() > before);
            assertEquals(List.of(true, true), jobs.ackMany(got));
            assertEquals(List.of(false), jobs.ackManyAsync(got.subList(0, 1)).get(10, TimeUnit.SECONDS));
            assertEquals(0L, jobs.lostLeases(), "acked here already: no lease was lost");
            assertFalse(jobs.offerWithOutcomeAsync("again", Duration.ZERO, "invoice-7").get(10, TimeUnit.SECONDS).getCreated(),
                    "acked within the idempotency retention");

            jobs.offer("last", Duration.ZERO);
            CompletableFuture<Void> running = jobs.consumeAsync(delivery -> delivery.getId(), 2);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!jobs.stats().equals(new ReliableStats(0, 0, 0, 0))) {
                assertTrue(System.nanoTime() < deadline, "consume did not ack: " + jobs.stats());
                Thread.sleep(10);
            }
            CompletableFuture<Void> closing = jobs.closeGracefullyAsync(Duration.ofSeconds(5));
            assertNull(closing.get(10, TimeUnit.SECONDS));
            assertNull(running.get(10, TimeUnit.SECONDS));
            assertThrows(ClosedException.class, jobs::stats);
        }
    }

    @Test
    void shardKeysAndMetricsFromJava(RedisServer redis) throws Exception {
        String name = RedisServer.Companion.uniqueName("java-shards");
        try (Client client = Client.connect(redis.getUrl());
                ReliableQueue jobs = client.reliableQueue(name, new ReliableQueueOptions().withShards(4))) {
            String id = jobs.offer("a", Duration.ZERO, null, "tenant-9");
            OfferOutcome out = jobs.offerWithOutcomeAsync("b", Duration.ZERO, null, "tenant-9").get(10, TimeUnit.SECONDS);
            jobs.offerAll(List.of(new ReliableOffer("c", Duration.ZERO, null, "tenant-9")));
            java.util.zip.CRC32 crc = new java.util.zip.CRC32();
            crc.update("tenant-9".getBytes(StandardCharsets.UTF_8));
            int expected = (int) (crc.getValue() % 4);
            List<Delivery> got = new ArrayList<>();
            while (got.size() < 3) got.addAll(jobs.receiveMany(10, Duration.ofSeconds(5)));
            for (Delivery d : got) assertEquals(expected, d.getShard(), d.getId());
            assertTrue(got.stream().anyMatch(d -> d.getId().equals(id) || d.getId().equals(out.getId())));
            assertEquals(List.of(true, true, true), jobs.ackMany(got));
            QueueMetrics mine = Metrics.snapshot().getQueues().stream()
                    .filter(q -> q.getName().equals(name)).findFirst().orElseThrow();
            assertEquals("reliable", mine.getKind());
            assertEquals(3L, mine.getAcked());
        }
    }

    @Test
    void codecFromJava() {
        byte[] id = {1, 2, 3, 4, 5, 6, 7, 8};
        byte[] packed = Codec.packEntry(id, "v".getBytes(StandardCharsets.UTF_8));
        assertEquals(1 + 8 + 8 + 1, packed.length);
        UnpackedEntry entry = Codec.unpackEntry(packed);
        assertArrayEquals(id, entry.getId());
        assertArrayEquals("v".getBytes(StandardCharsets.UTF_8), entry.getValue());
    }
}
