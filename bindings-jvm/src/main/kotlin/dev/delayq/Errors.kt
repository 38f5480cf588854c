package dev.delayq

import dev.delayq.ffi.FfiException
import dev.delayq.ffi.InternalException

/**
 * Every error delayq raises. [kind] is the stable, language-independent name of the error
 * (`invalid_argument`, `connection`, `timeout`, `wrong_type`, `closed`, `server`).
 * Messages never contain credentials.
 */
open class DelayqException(val kind: String, message: String, cause: Throwable? = null) :
    RuntimeException(message, cause)

/** A bad argument (negative or overflowing delay, empty name, value over 512 MiB). Nothing reached Redis. */
class InvalidArgumentException(message: String, cause: Throwable? = null) :
    DelayqException("invalid_argument", message, cause)

/**
 * Redis could not be reached, or the connection broke or went silent. When the request may
 * have been sent (its reply was lost), the outcome of the call is unknown and the message
 * says so. What the caller may assume then:
 * - an offer that failed may have been stored (at most once: delayq never sends it again).
 *   To be safe, offer a reliable queue's message again with the same id: it is not created
 *   twice (see [ReliableQueue.offer] for how long an id is remembered). A delayed queue's
 *   values carry no id: offering one again may store it twice.
 * - an ack that failed may have happened; if it did not, the message comes back after its
 *   lease (at-least-once).
 *
 * See `docs/faults.md`, "What a caller may assume
 * when a call fails".
 */
class ConnectionException(message: String, cause: Throwable? = null) :
    DelayqException("connection", message, cause)

/**
 * An operation took longer than its time limit. From an offer or ack with the [Durability] option: the write was applied on the master but
 * not confirmed in time; it may not survive a failover.
 */
class TimeoutException(message: String, cause: Throwable? = null) :
    DelayqException("timeout", message, cause)

/** A key of the queue holds another Redis type (`WRONGTYPE`). Nothing was written. */
class WrongTypeException(message: String, cause: Throwable? = null) :
    DelayqException("wrong_type", message, cause)

/** The queue handle or the client was closed. */
class ClosedException(message: String, cause: Throwable? = null) :
    DelayqException("closed", message, cause)

/** Any other error reported by the server (for example `OOM`, `NOPERM`). */
class ServerException(message: String, cause: Throwable? = null) :
    DelayqException("server", message, cause)

/** The generated error as a public exception. */
internal fun FfiException.toPublic(): DelayqException {
    val kind = when (this) {
        is FfiException.InvalidArgument -> "invalid_argument"
        is FfiException.Connection -> "connection"
        is FfiException.Timeout -> "timeout"
        is FfiException.WrongType -> "wrong_type"
        is FfiException.Closed -> "closed"
        is FfiException.Server -> "server"
    }
    return exceptionOf(kind, message ?: "", this)
}

/**
 * UniFFI's [InternalException] (a panic in the native library, a bug in delayq; a checked
 * exception to Java, which cannot catch it by name) as a [ServerException] (`server`, core's
 * kind for any other error), with the message the bridge fails an async call with when its
 * task panics.
 */
internal fun InternalException.toPublic(): DelayqException =
    ServerException("server error: internal error (a bug in delayq): $message", this)

/** This as a public exception if it is one of the native library's (or already public); else null. */
internal fun Throwable.toPublicOrNull(): DelayqException? =
    when (this) {
        is DelayqException -> this
        is FfiException -> toPublic()
        is InternalException -> toPublic()
        else -> null
    }

/** The one mapping from an error's [kind] name (see [DelayqException.kind]) to the public exceptions. */
internal fun exceptionOf(kind: String, message: String, cause: Throwable? = null): DelayqException =
    when (kind) {
        "invalid_argument" -> InvalidArgumentException(message, cause)
        "connection" -> ConnectionException(message, cause)
        "timeout" -> TimeoutException(message, cause)
        "wrong_type" -> WrongTypeException(message, cause)
        "closed" -> ClosedException(message, cause)
        else -> ServerException(message, cause)
    }

/** Runs a call into the native library, rethrowing its errors (and panics) as [DelayqException]s. */
internal inline fun <T> native(block: () -> T): T =
    try {
        block()
    } catch (e: FfiException) {
        throw e.toPublic()
    } catch (e: InternalException) {
        throw e.toPublic()
    } catch (e: java.nio.charset.CharacterCodingException) {
        // UniFFI's lowering of a String id, name or key that UTF-8 cannot hold.
        throw Bridge.notUtf8(e)
    }
