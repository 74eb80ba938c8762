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

/// Parses a duration such as "2s", "500ms", "8ms", "125us", "100ns", "1.5min", "0".
pub fn parse_duration(text: &str) -> Result<Nanos, UnitError> {
    let bad = || {
        UnitError(format!(
            "invalid duration `{text}`: expected a number and a unit, one of ns, us, ms, s, min, h (e.g. \"500ms\")"
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
    if !nanos.is_finite() || nanos > u64::MAX as f64 {
        return Err(UnitError(format!("duration `{text}` is too large")));
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

/// Parses a size such as "4KiB", "8GiB", "512", "1.5MB".
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let bad = || {
        UnitError(format!(
            "invalid size `{text}`: expected a number and a unit, one of B, KiB, MiB, GiB, TiB, kB, MB, GB, TB (e.g. \"4KiB\")"
        ))
    };
    let (value, unit) = split_number(text).ok_or_else(bad)?;
    let scale = size_scale(unit).ok_or_else(bad)?;
    let bytes = value * scale;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(UnitError(format!("size `{text}` is too large")));
    }
    Ok(bytes.round() as u64)
}

/// Parses a bandwidth such as "250MB/s" or "1.5GiB/s" into bytes per second.
pub fn parse_bandwidth(text: &str) -> Result<u64, UnitError> {
    let bad = || {
        UnitError(format!(
            "invalid bandwidth `{text}`: expected a size per second (e.g. \"250MB/s\")"
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
pub mod serde_units {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Accepts either a string with a unit or a bare integer (taken as the base unit).
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Int(u64),
    }

    pub mod duration {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
            match Raw::deserialize(d)? {
                Raw::Text(text) => parse_duration(&text).map_err(serde::de::Error::custom),
                Raw::Int(0) => Ok(0),
                Raw::Int(n) => Err(serde::de::Error::custom(format!(
                    "duration {n} has no unit: write e.g. \"{n}ms\" or \"{n}s\""
                ))),
            }
        }
        pub fn serialize<S: Serializer>(value: &Nanos, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&format!("{value}ns"))
        }
    }

    pub mod size {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
            match Raw::deserialize(d)? {
                Raw::Text(text) => parse_size(&text).map_err(serde::de::Error::custom),
                Raw::Int(n) => Ok(n),
            }
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

    pub mod bandwidth {
        use super::*;
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
            match Raw::deserialize(d)? {
                Raw::Text(text) => parse_bandwidth(&text).map_err(serde::de::Error::custom),
                Raw::Int(n) => Ok(n),
            }
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
