package dev.delayq.bench

import dev.delayq.packEntry

/** The cost of one call across the FFI without Redis: `packEntry` of a 44-byte value. */
object CallCost {
    @JvmStatic
    fun main(args: Array<String>) {
        val id = ByteArray(8)
        val value = ByteArray(44)
        repeat(5) {
            val n = 200_000
            val t0 = System.nanoTime()
            repeat(n) { packEntry(id, value) }
            println("packEntry through the jar: ${(System.nanoTime() - t0) / n} ns per call")
        }
    }
}
