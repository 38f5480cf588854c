//! Escaping for the log. Queue names, message ids, error messages (which may quote a name,
//! or a reply from Redis) come from requests and from Redis; written as they are, a line
//! feed in one would start a line that reads as a record of its own (log forging). Names
//! and ids are logged with `?` (Debug: quoted, `\n` and other control characters
//! escaped); texts meant to be read as they are, such as errors, through [`Esc`].

use std::fmt::{self, Write as _};

/// Displays `T` with `\` doubled and every control character (line feed, carriage return,
/// escape...) and line or paragraph separator escaped (`\n`, `\u{1b}`), so one record is
/// always one line.
pub(crate) struct Esc<T>(pub(crate) T);

impl<T: fmt::Display> fmt::Display for Esc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Escaper<'a, 'b>(&'a mut fmt::Formatter<'b>);
        impl fmt::Write for Escaper<'_, '_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for c in s.chars() {
                    if c == '\\' {
                        self.0.write_str("\\\\")?;
                    } else if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                        write!(self.0, "{}", c.escape_default())?;
                    } else {
                        self.0.write_char(c)?;
                    }
                }
                Ok(())
            }
        }
        write!(Escaper(f), "{}", self.0)
    }
}

#[cfg(test)]
#[test]
fn control_characters_are_escaped() {
    assert_eq!(
        Esc("a\nb\r\u{1b}[31mc\\d\u{2028}é").to_string(),
        r"a\nb\r\u{1b}[31mc\\d\u{2028}é"
    );
    assert_eq!(Esc("plain text: ok").to_string(), "plain text: ok");
}
