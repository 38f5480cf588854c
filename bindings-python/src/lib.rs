//! python binding (to be written).
