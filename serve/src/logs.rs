//! Escaping for the log. Queue names, message ids, error messages (which may quote a name,
//! or a reply from Redis) come from requests and from Redis; written as they are, a line
//! feed in one would start a line that reads as a record of its own (log forging). Names
//! and ids are logged with `?` (Debug: quoted, `\n` and other control characters
//! escaped); texts meant to be read as they are, such as errors, through [`Esc`].

/// Core's escaping, which core's own records use too.
pub(crate) use delayq::logs::Escaped as Esc;
