//! The packed entry of Redisson's delayed queue.
//!
//! Redisson packs each waiting entry with Lua's `struct.pack('Bc0Lc0', #id, id, #value, value)`:
//! one byte holding the id length, the id, the value length as an unsigned 64-bit
//! little-endian integer (`L` is a C `unsigned long`, 8 bytes on 64-bit Redis), then the
//! value. The scripts pack inside Redis; this module packs and unpacks the same bytes in
//! Rust (for `read_all` and for tests), and `tests/vectors/` proves the two agree.

use std::fmt;

/// Length of the random ids delayq generates (Redisson uses 8 random bytes too).
pub const ID_LEN: usize = 8;

/// Why a packed entry could not be unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(&'static str);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "undecodable entry: {}", self.0)
    }
}

impl std::error::Error for CodecError {}

/// A fresh random id for an entry.
pub fn random_id() -> [u8; ID_LEN] {
    crate::random::random()
}

/// Packs `id` and `value` the way `struct.pack('Bc0Lc0', ...)` does.
///
/// Fails with [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `id` is longer
/// than 255 bytes (its length is one byte; delayq generates 8-byte ids).
pub fn pack(id: &[u8], value: &[u8]) -> crate::Result<Vec<u8>> {
    let id_len = u8::try_from(id.len()).map_err(|_| {
        crate::Error::InvalidArgument(format!("entry id of {} bytes is over 255 bytes", id.len()))
    })?;
    let mut out = Vec::with_capacity(1 + id.len() + 8 + value.len());
    out.push(id_len);
    out.extend_from_slice(id);
    out.extend_from_slice(&(value.len() as u64).to_le_bytes());
    out.extend_from_slice(value);
    Ok(out)
}

/// Splits a packed entry into `(id, value)`. The whole input must be consumed: trailing
/// bytes mean the entry was written in another format and is rejected.
pub fn unpack(packed: &[u8]) -> Result<(&[u8], &[u8]), CodecError> {
    let (&id_len, rest) = packed.split_first().ok_or(CodecError("empty"))?;
    let id_len = id_len as usize;
    if rest.len() < id_len + 8 {
        return Err(CodecError("too short for its id and length"));
    }
    let (id, rest) = rest.split_at(id_len);
    let (len, value) = rest.split_at(8);
    let len = u64::from_le_bytes(len.try_into().expect("8 bytes"));
    if len != value.len() as u64 {
        return Err(CodecError("value length does not match"));
    }
    Ok((id, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_then_unpack_round_trips() {
        let id = [1u8, 2, 3, 4, 5, 6, 7, 8];
        for value in [&b""[..], b"hello", &[0u8, 255, 0][..]] {
            let packed = pack(&id, value).unwrap();
            assert_eq!(packed.len(), 1 + 8 + 8 + value.len());
            assert_eq!(unpack(&packed).unwrap(), (&id[..], value));
        }
    }

    #[test]
    fn unpack_rejects_truncated_and_trailing_bytes() {
        let packed = pack(b"12345678", b"abc").unwrap();
        assert!(unpack(&packed[..packed.len() - 1]).is_err());
        let mut longer = packed.clone();
        longer.push(0);
        assert!(unpack(&longer).is_err());
        assert!(unpack(b"").is_err());
        assert!(unpack(b"\x08abc").is_err());
    }

    #[test]
    fn pack_rejects_ids_over_255_bytes() {
        assert!(pack(&[7u8; 255], b"v").is_ok());
        let err = pack(&[7u8; 256], b"v").unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
    }
}
