//! jvm binding (to be written).
