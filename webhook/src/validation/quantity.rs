//! Kubernetes resource quantities, parsed far enough to compare two of them.

/// The value of a quantity (`500m`, `1Gi`, `2`, `1e3`, `0.5`), or None when it does not parse.
pub fn parse(q: &str) -> Option<f64> {
    let s = q.trim();
    if s.is_empty() {
        return None;
    }
    let (sign, rest) = match s.as_bytes()[0] {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = num.parse().ok()?;
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
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().ok()?;
            10f64.powi(e)
        }
        _ => return None,
    };
    Some(sign * value * factor)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn quantities() {
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("1Gi"), Some(1073741824.0));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("0.5"), Some(0.5));
        assert_eq!(parse("-1"), Some(-1.0));
        assert!(parse("1Gi") > parse("1G"));
        assert_eq!(parse("abc"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("1Xi"), None);
    }
}
