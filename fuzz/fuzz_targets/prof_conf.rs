//! The PROF_CONF parser on arbitrary text. Properties: no panic; at most one
//! warning per non-empty item; the result within the documented ranges
//! (MALLOC_CONF.md).
#![no_main]

use heapsample_options::config::{GdumpStep, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (config, warnings) = parse(&text);
    let items = text.split(',').filter(|i| !i.trim().is_empty()).count();
    assert!(warnings.len() <= items, "{} warnings for {items} items", warnings.len());
    assert!(config.lg_prof_sample <= 62);
    assert!((1..=256).contains(&config.prof_bt_max));
    assert!((-1..=62).contains(&config.lg_prof_interval));
    match config.prof_gdump_step {
        GdumpStep::Bytes(b) => assert!(b >= 1),
        GdumpStep::Percent { percent, .. } => assert!((1..=1000).contains(&percent)),
    }
    let s = config.prof_signal;
    assert!(s == 0 || [1, 10, 12, 23, 27, 28].contains(&s) || (34..=64).contains(&s));
    // Each item alone gives at most one warning.
    for item in text.split(',').filter(|i| !i.trim().is_empty()) {
        assert!(parse(item).1.len() <= 1, "item {item:?}");
    }
});
