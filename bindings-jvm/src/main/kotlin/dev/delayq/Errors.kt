package dev.delayq

import dev.delayq.ffi.FfiException

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

/** Redis could not be reached, or the connection broke. */
class ConnectionException(message: String, cause: Throwable? = null) :
    DelayqException("connection", message, cause)

/** An operation took longer than its time limit. */
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

/** The one mapping from the generated error to the public exceptions. */
internal fun FfiException.toPublic(): DelayqException {
    val msg = message ?: ""
    return when (this) {
        is FfiException.InvalidArgument -> InvalidArgumentException(msg, this)
        is FfiException.Connection -> ConnectionException(msg, this)
        is FfiException.Timeout -> TimeoutException(msg, this)
        is FfiException.WrongType -> WrongTypeException(msg, this)
        is FfiException.Closed -> ClosedException(msg, this)
        is FfiException.Server -> ServerException(msg, this)
    }
}

/** The exception for an error the native side reported by its [kind] name (see [DelayqException.kind]). */
internal fun exceptionOf(kind: String, message: String): DelayqException =
    when (kind) {
        "invalid_argument" -> InvalidArgumentException(message)
        "connection" -> ConnectionException(message)
        "timeout" -> TimeoutException(message)
        "wrong_type" -> WrongTypeException(message)
        "closed" -> ClosedException(message)
        else -> ServerException(message)
    }

/** Runs a call into the native library, rethrowing its errors as [DelayqException]s. */
internal inline fun <T> native(block: () -> T): T =
    try {
        block()
    } catch (e: FfiException) {
        throw e.toPublic()
    }
