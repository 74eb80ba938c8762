//! Units used throughout mobistack, and parsing of the human forms that scenario files and the CLI
//! accept ("2s", "500ms", "8GiB", "4KiB", "250MB/s").
//!
//! Time is virtual, in integer nanoseconds (`Nanos`). Sizes are bytes; sectors are 512 B and pages
//! 4 KiB, as in Linux. Decimal prefixes (kB, MB, GB) are powers of 1000 and binary ones (KiB, MiB,
//! GiB) powers of 1024, so a vendor's "250 MB/s" means what the vendor meant.

use std::fmt;

/// Virtual time or a duration, in nanoseconds.
pub type Nanos = u64;

pub const NS_PER_US: Nanos = 1_000;
pub const NS_PER_MS: Nanos = 1_000_000;
pub const NS_PER_SEC: Nanos = 1_000_000_000;

/// Bytes per sector (Linux `SECTOR_SIZE`).
pub const SECTOR_SIZE: u64 = 512;
/// Bytes per page (`PAGE_SIZE` on arm64 Android and x86).
pub const PAGE_SIZE: u64 = 4096;

/// Longest duration accepted anywhere (a run's length, a think time, a timeout): 365 days of
/// virtual time. Virtual time is a `u64` of nanoseconds (584 years); keeping every single
/// duration below one year leaves room for sums of times (a start time plus a duration plus a
/// sleep) never to overflow, instead of saturating silently at 2^64 ns.
pub const MAX_DURATION: Nanos = 365 * 24 * 3600 * NS_PER_SEC;
/// Largest size accepted in a scenario or job file: 1 PiB (2^50 bytes). Every size the model
/// uses has a tighter limit of its own (a device's capacity, a write's size); this one only keeps
/// arithmetic on sizes far from overflow.
pub const MAX_SIZE: u64 = 1 << 50;
/// How many characters of a bad value an error message repeats.
pub const SHOWN_CHARS: usize = 60;

/// `text` as an error message shows it: the first [`SHOWN_CHARS`] characters, then "..." and
/// the length when it is longer (a 1 MB bad value is not echoed back whole).
pub fn cut(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(SHOWN_CHARS).collect();
    if chars.next().is_none() {
        head
    } else {
        format!("{head}... ({} characters)", text.chars().count())
    }
}

/// `message` with every word (run of non-blank characters) longer than twice [`SHOWN_CHARS`]
/// cut by [`cut`]: for messages that quote a user's value without backticks ("bs=4k,...: ...").
pub fn cut_words(message: &str) -> String {
    // Twice the shown length, so that what `cut` made is never cut again.
    let long = |word: &str| word.chars().count() > 2 * SHOWN_CHARS;
    if !message.split_whitespace().any(long) {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len().min(1024));
    let mut word = String::new();
    for ch in message.chars().chain(std::iter::once(' ')) {
        if ch.is_whitespace() {
            if long(&word) {
                out.push_str(&cut(&word));
            } else {
                out.push_str(&word);
            }
            word.clear();
            out.push(ch);
        } else {
            word.push(ch);
        }
    }
    out.pop();
    out
}

/// Longest error message shown, in characters.
pub const MAX_MESSAGE_CHARS: usize = 1000;

/// `message` as shown to a user: long words cut ([`cut_words`]), then the whole cut to
/// [`MAX_MESSAGE_CHARS`] (a value with spaces or backticks in it is echoed in pieces that no
/// single cut catches).
pub fn cut_message(message: &str) -> String {
    let message = cut_words(message);
    let length = message.chars().count();
    if length <= MAX_MESSAGE_CHARS {
        return message;
    }
    let head: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
    format!("{head}... (message of {length} characters cut)")
}

/// Error from parsing a human-unit string; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

/// Splits "12.5ms" into (12.5, "ms"). The number may have a fractional part.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    if end == 0 {
        return None;
    }
    let number: String = text[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = number.parse().ok()?;
    Some((value, text[end..].trim()))
}

/// Parses a duration such as "2s", "500ms", "8ms", "125us", "100ns", "1.5min", "0". At most
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Nanos, UnitError> {
    let bad = || {
        UnitError(format!(
            "invalid duration `{}`: expected a number and a unit, one of ns, us, ms, s, min, h (e.g. \"500ms\")",
            cut(text)
        ))
    };
    let (value, unit) = split_number(text).ok_or_else(bad)?;
    let scale: f64 = match unit {
        "" if value == 0.0 => 0.0,
        "ns" => 1.0,
        "us" | "µs" => NS_PER_US as f64,
        "ms" => NS_PER_MS as f64,
        "s" => NS_PER_SEC as f64,
        "min" => 60.0 * NS_PER_SEC as f64,
        "h" => 3600.0 * NS_PER_SEC as f64,
        _ => return Err(bad()),
    };
    let nanos = value * scale;
    if !nanos.is_finite() || nanos > MAX_DURATION as f64 {
        return Err(UnitError(format!(
            "duration `{}` is too long: at most 365 days (\"8760h\")",
            cut(text)
        )));
    }
    Ok(nanos.round() as Nanos)
}

fn size_scale(unit: &str) -> Option<f64> {
    Some(match unit {
        "" | "B" => 1.0,
        "k" | "kB" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "T" | "TB" => 1e12,
        "K" | "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

/// Parses a size such as "4KiB", "8GiB", "512", "1.5MB". At most [`MAX_SIZE`].
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let bad = || {
        UnitError(format!(
            "invalid size `{}`: expected a number and a unit, one of B, KiB, MiB, GiB, TiB, kB, MB, GB, TB (e.g. \"4KiB\")",
            cut(text)
        ))
    };
    let (value, unit) = split_number(text).ok_or_else(bad)?;
    let scale = size_scale(unit).ok_or_else(bad)?;
    let bytes = value * scale;
    if !bytes.is_finite() || bytes > MAX_SIZE as f64 {
        return Err(UnitError(format!(
            "size `{}` is too large: at most 1 PiB (\"1024TiB\")",
            cut(text)
        )));
    }
    Ok(bytes.round() as u64)
}

/// Parses a bandwidth such as "250MB/s" or "1.5GiB/s" into bytes per second.
pub fn parse_bandwidth(text: &str) -> Result<u64, UnitError> {
    let bad = || {
        UnitError(format!(
            "invalid bandwidth `{}`: expected a size per second (e.g. \"250MB/s\")",
            cut(text)
        ))
    };
    let trimmed = text.trim();
    let size = trimmed.strip_suffix("/s").ok_or_else(bad)?;
    parse_size(size).map_err(|_| bad())
}

/// Formats a duration in milliseconds with three significant figures, the project's display rule.
pub fn format_ms(nanos: f64) -> String {
    let ms = nanos / NS_PER_MS as f64;
    if ms == 0.0 {
        return "0".to_string();
    }
    let magnitude = ms.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    format!("{ms:.decimals$}")
}

/// Formats bytes with a binary unit, e.g. "8.00 GiB".
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// Serde helpers so configuration structs can hold `Nanos` and byte counts written in human units.
///
/// Each accepts a string with a unit or a non-negative integer (the base unit; for durations
/// only `0`), and says what it expected, with an example, when given anything else.
pub mod serde_units {
    use super::*;
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    /// The three kinds of quantity, with what each error message says it expected.
    #[derive(Clone, Copy)]
    enum Kind {
        Duration,
        Size,
        Bandwidth,
    }

    struct UnitVisitor(Kind);

    impl<'de> Visitor<'de> for UnitVisitor {
        type Value = u64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self.0 {
                Kind::Duration => "a duration: a string with a unit, e.g. \"500ms\" or \"2s\"",
                Kind::Size => "a size: a string with a unit, e.g. \"4KiB\", or a number of bytes",
                Kind::Bandwidth => "a bandwidth: a string such as \"250MB/s\"",
            })
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
            match self.0 {
                Kind::Duration => parse_duration(text),
                Kind::Size => parse_size(text),
                Kind::Bandwidth => parse_bandwidth(text),
            }
            .map_err(E::custom)
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
            match self.0 {
                Kind::Duration if n != 0 => Err(E::custom(format!(
                    "duration {n} has no unit: write e.g. \"{n}ms\" or \"{n}s\""
                ))),
                Kind::Size if n > MAX_SIZE => Err(E::custom(format!(
                    "size {n} is too large: at most 1 PiB (\"1024TiB\")"
                ))),
                _ => Ok(n),
            }
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
            if n < 0 {
                let what = match self.0 {
                    Kind::Duration => "duration",
                    Kind::Size => "size",
                    Kind::Bandwidth => "bandwidth",
                };
                return Err(E::custom(format!("{what} {n} must not be negative")));
            }
            self.visit_u64(n as u64)
        }

        fn visit_f64<E: de::Error>(self, x: f64) -> Result<u64, E> {
            let example = match self.0 {
                Kind::Duration => "\"1.5ms\"",
                Kind::Size => "\"1.5MiB\"",
                Kind::Bandwidth => "\"1.5MB/s\"",
            };
            Err(E::custom(format!(
                "{x} is a bare number: write a string with a unit, e.g. {example}"
            )))
        }
    }

    fn deserialize_kind<'de, D: Deserializer<'de>>(d: D, kind: Kind) -> Result<u64, D::Error> {
        d.deserialize_any(UnitVisitor(kind))
    }

    pub mod duration {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
            deserialize_kind(d, Kind::Duration)
        }
        pub fn serialize<S: Serializer>(value: &Nanos, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&format!("{value}ns"))
        }
    }

    pub mod size {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
            deserialize_kind(d, Kind::Size)
        }
        pub fn serialize<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(*value)
        }
    }

    /// An optional size (`None` when the field is absent; pair with `#[serde(default)]`).
    pub mod option_size {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            super::size::deserialize(d).map(Some)
        }
        pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            match value {
                Some(v) => s.serialize_u64(*v),
                None => s.serialize_none(),
            }
        }
    }

    /// An optional duration (`None` when the field is absent; pair with `#[serde(default)]`).
    pub mod option_duration {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
            super::duration::deserialize(d).map(Some)
        }
        pub fn serialize<S: Serializer>(value: &Option<Nanos>, s: S) -> Result<S::Ok, S::Error> {
            match value {
                Some(v) => s.serialize_str(&format!("{v}ns")),
                None => s.serialize_none(),
            }
        }
    }

    pub mod option_bandwidth {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            super::bandwidth::deserialize(d).map(Some)
        }
        pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            match value {
                Some(v) => s.serialize_u64(*v),
                None => s.serialize_none(),
            }
        }
    }

    pub mod bandwidth {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
            deserialize_kind(d, Kind::Bandwidth)
        }
        pub fn serialize<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(*value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("2s").unwrap(), 2 * NS_PER_SEC);
        assert_eq!(parse_duration("500ms").unwrap(), 500 * NS_PER_MS);
        assert_eq!(parse_duration("125us").unwrap(), 125 * NS_PER_US);
        assert_eq!(parse_duration("1.5min").unwrap(), 90 * NS_PER_SEC);
        assert_eq!(parse_duration("0").unwrap(), 0);
        assert!(parse_duration("2").is_err());
        assert!(parse_duration("2 parsecs").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn durations_and_sizes_have_documented_limits_instead_of_saturating() {
        // 2^64 - 1 ns used to be accepted and saturate.
        let error = parse_duration("18446744073709551615ns").unwrap_err();
        assert!(error.0.contains("at most 365 days"), "{error}");
        assert_eq!(parse_duration("8760h").unwrap(), MAX_DURATION);
        assert!(parse_duration("8761h").is_err());
        assert!(parse_size("1024TiB").is_ok());
        assert!(parse_size("1025TiB")
            .unwrap_err()
            .0
            .contains("at most 1 PiB"));
    }

    #[test]
    fn long_bad_values_are_cut_in_messages() {
        let long = "9".repeat(100_000) + "x";
        let error = parse_size(&long).unwrap_err().0;
        assert!(error.len() < 300, "{} bytes", error.len());
        assert!(error.contains("... (100001 characters)"), "{error}");
        assert_eq!(cut("short"), "short");
        // A value with spaces and backticks in it: no word is long, the message is.
        let spaced = format!("unknown profile `{}`", "a` b ".repeat(5_000));
        let shown = cut_message(&spaced);
        assert!(
            shown.chars().count() < MAX_MESSAGE_CHARS + 60,
            "{}",
            shown.len()
        );
        assert!(shown.ends_with("characters cut)"));
    }

    #[test]
    fn unit_fields_say_what_they_expect_for_every_wrong_type() {
        #[derive(serde::Deserialize, Debug)]
        struct T {
            #[serde(with = "serde_units::duration")]
            #[allow(dead_code)]
            d: Nanos,
        }
        for (value, expected) in [
            (
                "true",
                "expected a duration: a string with a unit, e.g. \"500ms\"",
            ),
            ("1.5", "write a string with a unit, e.g. \"1.5ms\""),
            ("-3", "must not be negative"),
            ("[1]", "expected a duration"),
            ("7", "has no unit"),
        ] {
            let error = toml::from_str::<T>(&format!("d = {value}")).unwrap_err();
            assert!(
                error.message().contains(expected),
                "{value}: {}",
                error.message()
            );
            assert!(!error.message().contains("untagged"), "{value}");
        }
    }

    #[test]
    fn sizes_parse_decimal_and_binary() {
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(parse_size("4KB/s").is_err());
        assert_eq!(parse_bandwidth("250MB/s").unwrap(), 250_000_000);
        assert!(parse_bandwidth("250MB").is_err());
    }

    #[test]
    fn milliseconds_print_with_three_significant_figures() {
        assert_eq!(format_ms(1_234_567.0), "1.23");
        assert_eq!(format_ms(12_345_678.0), "12.3");
        assert_eq!(format_ms(123_456_789.0), "123");
        assert_eq!(format_ms(1_234_567_890.0), "1235");
        assert_eq!(format_ms(0.0), "0");
    }
}
