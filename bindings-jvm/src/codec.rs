//! The packed entry of Redisson's delayed queue, over `delayq::codec`.

use crate::error::FfiError;

/// An unpacked entry: its id and its value.
#[derive(Debug, Clone, uniffi::Record)]
pub struct UnpackedEntry {
    pub id: Vec<u8>,
    pub value: Vec<u8>,
}

/// Packs `id` and `value` as Redisson's scripts do.
#[uniffi::export]
pub fn pack_entry(id: Vec<u8>, value: Vec<u8>) -> Result<Vec<u8>, FfiError> {
    Ok(delayq::codec::pack(&id, &value)?)
}

/// Splits a packed entry into its id and value.
#[uniffi::export]
pub fn unpack_entry(packed: Vec<u8>) -> Result<UnpackedEntry, FfiError> {
    let (id, value) =
        delayq::codec::unpack(&packed).map_err(|e| FfiError::InvalidArgument(e.to_string()))?;
    Ok(UnpackedEntry {
        id: id.to_vec(),
        value: value.to_vec(),
    })
}
