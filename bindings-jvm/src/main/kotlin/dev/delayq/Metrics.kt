package dev.delayq

import dev.delayq.ffi.metricsSnapshot
import dev.delayq.ffi.Histogram as FfiHistogram

/**
 * A histogram of observations in seconds: [buckets] with cumulative counts at or below each
 * upper bound, ascending (the `+Inf` bucket is [count]), and [sumSeconds] of them all.
 */
data class Histogram(val buckets: List<Bucket>, val count: Long, val sumSeconds: Double) {
    /** Observations at or below [le] seconds. */
    data class Bucket(val le: Double, val count: Long)
}

/**
 * What this process did with one queue since it started: [kind] is `delayed` or `reliable`;
 * [offered] counts created messages (not de-duplicated offers), [delivered] receives or takes,
 * [acked] acks that held their lease, [nacked] nacks for a retry, [dead] messages buried
 * (nacked, or their lease ended, on the last attempt; the latter when this process's transfer
 * pass found it), [transferErrors] failed transfer passes; [lateness] runs from due time to
 * receipt (reliable queues, server clock), [transferDuration] times each transfer pass.
 */
data class QueueMetrics(
    /** `delayed` or `reliable`. */
    val kind: String,
    /** The queue's name. */
    val name: String,
    /** Messages created by offers (not de-duplicated offers). */
    val offered: Long,
    /** Receives or takes. */
    val delivered: Long,
    /** Acks that held their lease. */
    val acked: Long,
    /** Nacks for a retry. */
    val nacked: Long,
    /** Messages buried: nacked, or their lease ended, on the last attempt (the latter when this process's transfer pass found it). */
    val dead: Long,
    /** Failed transfer passes. */
    val transferErrors: Long,
    /** From due time to receipt (reliable queues, server clock). */
    val lateness: Histogram,
    /** The time of each transfer pass. */
    val transferDuration: Histogram,
)

/**
 * Every counter of this process (the ones `delayq serve` exports on `/metrics`): one
 * [QueueMetrics] per queue that had an event, sorted by kind and name, then the
 * [connectionErrors] and [timeouts] core saw. Not the queue's contents in Redis (that is
 * `stats()`).
 */
data class Metrics(val queues: List<QueueMetrics>, val connectionErrors: Long, val timeouts: Long) {
    companion object {
        /** Reads every counter of this process now. */
        @JvmStatic
        fun snapshot(): Metrics {
            Bridge.start() // may be the first native call
            val s = native { metricsSnapshot() }
            val queues =
                s.queues.map {
                    QueueMetrics(
                        it.kind.name.lowercase(), it.name, it.offered.toLong(), it.delivered.toLong(), it.acked.toLong(),
                        it.nacked.toLong(), it.dead.toLong(), it.transferErrors.toLong(), histogram(it.lateness),
                        histogram(it.transferDuration),
                    )
                }
            return Metrics(queues, s.connectionErrors.toLong(), s.timeouts.toLong())
        }

        private fun histogram(h: FfiHistogram) =
            Histogram(h.bounds.zip(h.counts) { le, n -> Histogram.Bucket(le, n.toLong()) }, h.count.toLong(), h.sumSeconds)
    }
}
