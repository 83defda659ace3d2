//! Kubernetes resource quantities: the grammar of apimachinery's `resource.ParseQuantity`, with
//! its two error texts, and the value far enough to compare two quantities.

use crate::field::{FieldError, Path, Violations};

/// `resource.ErrFormatWrong`.
pub const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `resource.ErrSuffix`.
pub const BAD_SUFFIX: &str = "unable to parse quantity's suffix";

/// The value of a quantity (`500m`, `1Gi`, `2`, `1e3`, `0.5`), or the API server's reason when
/// it does not parse. Like `ParseQuantity`, no whitespace is allowed, a lone sign or `.` is
/// zero, and `1.G` is accepted.
pub fn parse(q: &str) -> Result<f64, &'static str> {
    if q.is_empty() {
        return Err(FORMAT_WRONG);
    }
    let (sign, rest) = match q.as_bytes()[0] {
        b'+' => (1.0, &q[1..]),
        b'-' => (-1.0, &q[1..]),
        _ => (1.0, q),
    };
    let int_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (int, after) = rest.split_at(int_end);
    let (frac, suffix) = match after.strip_prefix('.') {
        Some(tail) => {
            let end = tail
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(tail.len());
            tail.split_at(end)
        }
        None => ("", after),
    };
    // The suffix: letters of the SI and binary units, then an optional signed exponent.
    let letters_end = suffix
        .find(|c: char| !"eEinumkKMGTP".contains(c))
        .unwrap_or(suffix.len());
    let exponent = &suffix[letters_end..];
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FORMAT_WRONG);
    }
    let mantissa: f64 = if int.is_empty() && frac.is_empty() {
        0.0
    } else {
        format!("{}.{frac}", if int.is_empty() { "0" } else { int })
            .parse()
            .map_err(|_| FORMAT_WRONG)?
    };
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.len() > 1 && exp.starts_with(['e', 'E']) => {
            // Any int64 exponent parses; past a few hundred the value is 0 or infinite anyway.
            let e: i64 = exp[1..].parse().map_err(|_| BAD_SUFFIX)?;
            10f64.powi(e.clamp(-400, 400) as i32)
        }
        _ => return Err(BAD_SUFFIX),
    };
    Ok(sign * mantissa * factor)
}

/// Parses the quantity at `path`, reporting one that does not parse as the API server would
/// refuse it in the object the operator writes.
pub fn checked(path: &Path, q: &str, errors: &mut Violations) -> Option<f64> {
    match parse(q) {
        Ok(v) => Some(v),
        Err(why) => {
            errors.push(FieldError::invalid(path, q, why));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BAD_SUFFIX, FORMAT_WRONG, parse};

    #[test]
    fn quantities_follow_parse_quantity() {
        for (q, want) in [
            ("500m", 0.5),
            ("2", 2.0),
            ("1Gi", 1073741824.0),
            ("1e3", 1000.0),
            ("1E-3", 0.001),
            ("0.5", 0.5),
            (".5", 0.5),
            ("1.", 1.0),
            ("1.G", 1e9),
            ("-1", -1.0),
            ("+2k", 2000.0),
            ("-", 0.0),
            (".", 0.0),
            ("0", 0.0),
        ] {
            assert_eq!(parse(q), Ok(want), "{q}");
        }
        assert!(parse("1Gi") > parse("1G"));
        for (q, want) in [
            ("", FORMAT_WRONG),
            ("lots", FORMAT_WRONG),
            (" 1", FORMAT_WRONG),
            ("1 ", FORMAT_WRONG),
            ("1.2.3", FORMAT_WRONG),
            ("1Gix", FORMAT_WRONG),
            ("1Xi", FORMAT_WRONG),
            ("1e", BAD_SUFFIX),
            ("1Gb", FORMAT_WRONG),
            ("1iK", BAD_SUFFIX),
            ("1mm", BAD_SUFFIX),
        ] {
            assert_eq!(parse(q), Err(want), "{q}");
        }
    }
}
