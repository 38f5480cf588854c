//! Python values to core types. Validation itself is core's (`delayq::delay`).

use std::path::PathBuf;
use std::time::Duration;

use delayq::delay::{self as check, Integer};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDelta, PyDeltaAccess, PyFloat, PyInt};
use pyo3::types::{PyMapping, PyMemoryView, PySequence, PyString};

use crate::error::{invalid, to_py};

/// Any Python object passed to a native method.
pub type Obj<'py> = Bound<'py, PyAny>;

/// An invalid argument: `what` (as "id must be a str"), then the type `obj` has instead.
pub fn wrong(what: &str, obj: &Obj<'_>) -> PyErr {
    let name = obj.get_type().name().map_or("?".into(), |n| n.to_string());
    invalid(format!("{what}, not {name}"))
}

/// A `str` argument named `what` (an id, a name, a shard key), valid UTF-8.
pub fn string(obj: &Obj<'_>, what: &str) -> PyResult<String> {
    Ok(string_cow(obj, what)?.into_owned())
}

/// [`string`], borrowed from the `str` where it can be.
fn string_cow<'a>(obj: &'a Obj<'_>, what: &str) -> PyResult<std::borrow::Cow<'a, str>> {
    let Ok(s) = obj.cast::<PyString>() else {
        return Err(wrong(&format!("{what} must be a str"), obj));
    };
    let utf8 = |e: PyErr| invalid(format!("{what} must be valid UTF-8 ({e})"));
    s.to_cow().map_err(utf8)
}

/// A `bool` argument named `what` (an int is refused: `cluster=1` is a mistake to report).
pub fn boolean(obj: &Obj<'_>, what: &str) -> PyResult<bool> {
    let not = || wrong(&format!("{what} must be a bool"), obj);
    obj.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| not())
}

/// An optional file path (`str` or `os.PathLike`) named `what`: None when None.
pub fn opt_path(obj: &Obj<'_>, what: &str) -> PyResult<Option<PathBuf>> {
    let not = || wrong(&format!("{what} must be a str or os.PathLike"), obj);
    (!obj.is_none())
        .then(|| obj.extract().map_err(|_| not()))
        .transpose()
}

/// An optional `str` argument: None when None.
pub fn opt_string(obj: &Obj<'_>, what: &str) -> PyResult<Option<String>> {
    (!obj.is_none()).then(|| string(obj, what)).transpose()
}

/// A list of `str` (any iterable of them, as `items`) named `what`.
pub fn strings(obj: &Obj<'_>, what: &str) -> PyResult<Vec<String>> {
    let each = format!("each item of {what}");
    let list = items(obj, &format!("{what} must be a list of str"))?;
    list.iter().map(|s| string(s, &each)).collect()
}

/// The items of an iterable but a `str` or `bytes`; else "`what`, not ...".
pub fn items<'py>(obj: &Obj<'py>, what: &str) -> PyResult<Vec<Obj<'py>>> {
    let text = obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>();
    match obj.try_iter() {
        Ok(iter) if !text => iter.collect(),
        _ => Err(wrong(what, obj)),
    }
}

/// The items of an iterable in an order of its own (as `items`): a mapping (whose items
/// would be its keys) or a set (in no order) is refused, "`what` in order, not ...".
pub fn sequence<'py>(obj: &Obj<'py>, what: &str) -> PyResult<Vec<Obj<'py>>> {
    let set = obj.py().import("collections.abc")?.getattr("Set")?;
    if obj.is_instance_of::<PyMapping>() || obj.is_instance(&set)? {
        return Err(wrong(&format!("{what} in order"), obj));
    }
    items(obj, what)
}

/// The 2 to `N` items of a tuple (or any other sequence, as `items`), padded with None.
pub fn tuple<'py, const N: usize>(obj: &Obj<'py>, what: &str) -> PyResult<[Obj<'py>; N]> {
    obj.cast::<PySequence>().map_err(|_| wrong(what, obj))?;
    let (list, name) = (items(obj, what)?, obj.get_type().name()?);
    if !(2..=N).contains(&list.len()) {
        return Err(invalid(format!(
            "{what}, not a {name} of length {}",
            list.len()
        )));
    }
    let (mut list, none) = (list.into_iter(), || obj.py().None().into_bound(obj.py()));
    Ok(std::array::from_fn(|_| list.next().unwrap_or_else(none)))
}

/// Bytes in, `what` in the errors (`as_str` when it is a `str` that has no UTF-8):
/// `bytes`, `bytearray`, `memoryview` (or any buffer of bytes) or `str` (UTF-8).
pub fn bytes_like(obj: &Obj<'_>, what: &str, as_str: &str) -> PyResult<Vec<u8>> {
    bytes_sized(obj, what, as_str, |_| Ok(()))
}

/// [`bytes_like`], with `size` checking the length before anything is copied.
fn bytes_sized(
    obj: &Obj<'_>,
    what: &str,
    as_str: &str,
    size: impl Fn(usize) -> PyResult<()>,
) -> PyResult<Vec<u8>> {
    Ok(if let Ok(b) = obj.cast::<PyBytes>() {
        size(b.as_bytes().len())?;
        b.as_bytes().to_vec()
    } else if obj.is_instance_of::<PyString>() {
        size(obj.len()?)?; // its characters: at most its UTF-8 bytes, known without a copy
        let s = string_cow(obj, as_str)?;
        size(s.len())?;
        s.into_owned().into_bytes()
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        size(b.len())?;
        b.to_vec()
    } else if obj.is_instance_of::<PyMemoryView>() {
        size(obj.getattr("nbytes")?.extract()?)?;
        let b = obj.call_method0("tobytes")?;
        b.cast::<PyBytes>()?.as_bytes().to_vec()
    } else {
        let msg = format!("{what} must be bytes, bytearray, memoryview or str");
        return Err(wrong(&msg, obj));
    })
}

/// A value in (see `bytes_like`), at most 512 MiB (checked before it is copied).
pub fn value(obj: &Obj<'_>) -> PyResult<Vec<u8>> {
    let size = |n| check::check_value_len(n).map_err(to_py);
    bytes_sized(obj, "a value", "a str value", size)
}

/// A Python `int` of any size (it is not checked here: core does that).
fn integer(obj: &Obj<'_>) -> PyResult<Integer> {
    match obj.extract::<i64>() {
        Ok(n) => Ok(Integer::Exact(n)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(match obj.lt(0)? {
            true => Integer::Below,
            false => Integer::Above,
        }),
        Err(e) => Err(e),
    }
}

/// Seconds (a whole `int` of any size, a `float` or a `timedelta`) named `what`, made a
/// duration by core's `whole` or `float` (the rules of a delay or of a timeout).
fn seconds(
    obj: &Obj<'_>,
    what: &str,
    whole: impl FnOnce(Integer) -> delayq::Result<Duration>,
    float: impl FnOnce(f64) -> delayq::Result<Duration>,
    exact: impl FnOnce(Duration) -> delayq::Result<Duration>,
) -> PyResult<Duration> {
    let secs = if let Ok(d) = obj.cast::<PyDelta>() {
        if d.get_days() >= 0 {
            // Exactly, not through float seconds (timedelta(milliseconds=2**50) came out
            // 1 ms longer, over the limit).
            let secs = d.get_days() as u64 * 86_400 + d.get_seconds() as u64;
            let nanos = d.get_microseconds() as u32 * 1_000;
            return exact(Duration::new(secs, nanos)).map_err(to_py);
        }
        let days = d.get_days() as f64 * 86_400.0;
        days + d.get_seconds() as f64 + d.get_microseconds() as f64 / 1e6
    } else if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return whole(integer(obj)?).map_err(to_py);
    } else if obj.is_instance_of::<PyFloat>() {
        obj.extract::<f64>()?
    } else {
        let msg = format!("{what} must be int, float or timedelta seconds");
        return Err(wrong(&msg, obj));
    };
    float(secs).map_err(to_py)
}

/// A delay in seconds (`int`, `float`, `timedelta`), checked by core.
pub fn delay(obj: &Obj<'_>) -> PyResult<Duration> {
    delay_named(obj, "delay")
}

/// A duration named `what` checked like a delay (a queue setting, a back-off).
pub fn delay_named(obj: &Obj<'_>, what: &str) -> PyResult<Duration> {
    let whole = |n| check::duration_from_secs_integer(n, what);
    let (float, exact) = (
        |s| check::duration_from_secs_f64(s, what),
        |d| check::duration_to_millis(d, what).map(|_| d),
    );
    seconds(obj, what, whole, float, exact)
}

/// A duration named `what` checked like a timeout (a timeout, the reconcile interval).
pub fn duration(obj: &Obj<'_>, what: &str) -> PyResult<Duration> {
    let whole = |n| check::timeout_from_secs_integer(n, what);
    let float = |s| check::timeout_from_secs_f64(s, what);
    seconds(obj, what, whole, float, Ok)
}

/// A timeout in seconds, or `None` for no limit.
pub fn timeout(obj: Option<Obj<'_>>) -> PyResult<Option<Duration>> {
    obj.map(|o| duration(&o, "timeout")).transpose()
}

/// An optional delay (a nack's delay): None when None.
pub fn opt_delay(obj: Option<Obj<'_>>) -> PyResult<Option<Duration>> {
    obj.map(|o| delay(&o)).transpose()
}

/// An optional queue setting that is a duration, named `what`: None when None.
pub fn setting(obj: Option<Obj<'_>>, what: &str) -> PyResult<Option<Duration>> {
    obj.map(|o| delay_named(&o, what)).transpose()
}

/// A count named `what` (a limit, a concurrency, a number of attempts): an `int` of any
/// size, checked by core.
pub fn count<T: TryFrom<u64>>(obj: &Obj<'_>, what: &str) -> PyResult<T> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(wrong(&format!("{what} must be an int"), obj));
    }
    check::count_from_integer(integer(obj)?, what).map_err(to_py)
}

/// An optional count (a queue setting): None when None.
pub fn opt_count(obj: Option<Obj<'_>>, what: &str) -> PyResult<Option<u32>> {
    obj.map(|o| count(&o, what)).transpose()
}
