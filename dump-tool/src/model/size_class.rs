//! Size classes: the power-of-two class of a mean object size, as the
//! name of a synthetic leaf frame (`[4–8 KiB]`). Plain formatting.

/// The power-of-two class holding `size` bytes: `[64–128 B]`, `[4–8 KiB]`.
pub fn size_class(size: f64) -> String {
    if size < 1.0 {
        return "[0–1 B]".to_string();
    }
    let exponent = size.log2().floor().clamp(0.0, 62.0) as u32;
    let (low, high) = (1u64 << exponent, 1u64 << (exponent + 1));
    let (divisor, unit) = match exponent {
        0..=9 => (1, "B"),
        10..=19 => (1 << 10, "KiB"),
        20..=29 => (1 << 20, "MiB"),
        30..=39 => (1 << 30, "GiB"),
        _ => (1 << 40, "TiB"),
    };
    // 512–1024 B reads better as 512 B–1 KiB.
    let high_text = if high / divisor >= 1024 {
        format!("{} {}", high / divisor / 1024, next_unit(unit))
    } else {
        format!("{}", high / divisor)
    };
    if high_text.contains(' ') {
        format!("[{} {unit}–{high_text}]", low / divisor)
    } else {
        format!("[{}–{high_text} {unit}]", low / divisor)
    }
}

fn next_unit(unit: &str) -> &'static str {
    match unit {
        "B" => "KiB",
        "KiB" => "MiB",
        "MiB" => "GiB",
        "GiB" => "TiB",
        _ => "PiB",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes() {
        assert_eq!(size_class(1.0), "[1–2 B]");
        assert_eq!(size_class(100.0), "[64–128 B]");
        assert_eq!(size_class(600.0), "[512 B–1 KiB]");
        assert_eq!(size_class(4096.0), "[4–8 KiB]");
        assert_eq!(size_class(5000.0), "[4–8 KiB]");
        assert_eq!(size_class(3.0 * 1048576.0), "[2–4 MiB]");
        assert_eq!(size_class(0.5), "[0–1 B]");
    }
}
