@file:JvmName("Codec")

package dev.delayq

/** An entry split by [unpackEntry]: its id and its value. */
class UnpackedEntry(val id: ByteArray, val value: ByteArray)

/** Packs [id] and [value] the way Redisson's scripts do (`struct.pack('Bc0Lc0', ...)`). */
fun packEntry(id: ByteArray, value: ByteArray): ByteArray {
    Bridge.start() // may be the first native call
    return native { dev.delayq.ffi.packEntry(id, value) }
}

/** Splits a packed entry; throws [InvalidArgumentException] if it is not one. */
fun unpackEntry(packed: ByteArray): UnpackedEntry {
    Bridge.start()
    return native { dev.delayq.ffi.unpackEntry(packed).let { UnpackedEntry(it.id, it.value) } }
}
