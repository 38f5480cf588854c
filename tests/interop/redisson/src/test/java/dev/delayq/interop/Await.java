package dev.delayq.interop;

import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Polling with a deadline: the tests wait for conditions, never for fixed times. */
final class Await {
    private Await() {
    }

    static void until(Duration timeout, BooleanSupplier condition, Supplier<String> message) {
        long deadline = System.nanoTime() + timeout.toNanos();
        long pause = 5;
        while (true) {
            if (condition.getAsBoolean()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout + ": " + message.get());
            }
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting: " + message.get());
            }
            pause = Math.min(pause * 2, 100);
        }
    }
}
