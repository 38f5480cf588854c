//! node binding (to be written).
