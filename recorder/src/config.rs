//! `PROF_CONF`: the profiler's options, in jemalloc's `MALLOC_CONF` syntax
//! (`key:value,key:value`), documented in `MALLOC_CONF.md`.
//!
//! Owns parsing and the validated [`Config`]. Parsing is a pure function so
//! it can be tested (and fuzzed) without a process around it; every problem
//! becomes one warning naming the item and the value used instead.

use std::fmt::Write;

/// Every option, with its effective value.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Profile at all; `false` leaves a pure pass-through shim.
    pub prof: bool,
    /// Sample allocations (can be toggled at run time).
    pub prof_active: bool,
    /// log2 of the mean sampling period in bytes.
    pub lg_prof_sample: u32,
    /// Keep stacks whose objects have all been freed (allocation views).
    pub prof_accum: bool,
    /// Dump at exit.
    pub prof_final: bool,
    /// Print a leak summary at exit.
    pub prof_leak: bool,
    /// File name prefix of automatic dumps; may contain a directory.
    pub prof_prefix: String,
    /// Maximum frames kept per stack.
    pub prof_bt_max: u32,
    /// Keep the exact live heap in usable bytes.
    pub prof_exact: bool,
    /// log2 of the bytes allocated between interval dumps; -1 is off.
    pub lg_prof_interval: i32,
    /// Dump at each new high-water mark of the live heap.
    pub prof_gdump: bool,
    /// Minimum growth over the previous high-water dump.
    pub prof_gdump_step: GdumpStep,
    /// Signal that triggers a dump (0: none).
    pub prof_signal: i32,
    /// Which unwinder captures stacks.
    pub prof_unwind: Unwinder,
}

/// The stack unwinder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwinder {
    /// Cached CFI rules (`heapsample-unwind`), falling back to libgcc.
    Fast,
    /// libgcc's `_Unwind_Backtrace` for every stack.
    Libgcc,
}

/// How far the live heap must grow past the last high-water dump.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GdumpStep {
    /// A fixed number of bytes.
    Bytes(u64),
    /// A percentage of the previous high-water mark, at least `floor` bytes.
    Percent { percent: u32, floor: u64 },
}

impl GdumpStep {
    /// The growth needed over a high-water mark of `previous_high` bytes.
    pub fn step_over(self, previous_high: u64) -> u64 {
        match self {
            GdumpStep::Bytes(bytes) => bytes.max(1),
            GdumpStep::Percent { percent, floor } => {
                let share = u128::from(previous_high) * u128::from(percent) / 100;
                (share.min(u128::from(u64::MAX)) as u64).max(floor).max(1)
            }
        }
    }
}

/// The default high-water step: max(64 MiB, 10 % of the previous high).
pub const DEFAULT_GDUMP_STEP: GdumpStep = GdumpStep::Percent {
    percent: 10,
    floor: 64 << 20,
};

impl Default for Config {
    fn default() -> Self {
        Config {
            prof: true,
            prof_active: true,
            lg_prof_sample: 19,
            prof_accum: true,
            prof_final: true,
            prof_leak: false,
            prof_prefix: "heapsample".to_string(),
            prof_bt_max: 128,
            prof_exact: false,
            lg_prof_interval: -1,
            prof_gdump: false,
            prof_gdump_step: DEFAULT_GDUMP_STEP,
            prof_signal: 0,
            prof_unwind: Unwinder::Fast,
        }
    }
}

/// The largest `lg_prof_sample`.
pub const MAX_LG_PROF_SAMPLE: u32 = 62;
/// The largest `prof_bt_max`.
pub const MAX_BT_MAX: u32 = 256;

impl Config {
    /// The options as `key:value,...`, recorded in every dump.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "prof:{},prof_active:{},lg_prof_sample:{},prof_accum:{},prof_final:{},prof_leak:{},\
             prof_prefix:{},prof_bt_max:{},prof_exact:{},lg_prof_interval:{},prof_gdump:{},\
             prof_gdump_step:{},prof_signal:{},prof_unwind:{}",
            self.prof,
            self.prof_active,
            self.lg_prof_sample,
            self.prof_accum,
            self.prof_final,
            self.prof_leak,
            self.prof_prefix,
            self.prof_bt_max,
            self.prof_exact,
            self.lg_prof_interval,
            self.prof_gdump,
            describe_step(self.prof_gdump_step),
            signal_name(self.prof_signal),
            match self.prof_unwind {
                Unwinder::Fast => "fast",
                Unwinder::Libgcc => "libgcc",
            },
        );
        out
    }
}

fn describe_step(step: GdumpStep) -> String {
    match step {
        GdumpStep::Bytes(bytes) => bytes.to_string(),
        GdumpStep::Percent { percent, .. } => format!("{percent}%"),
    }
}

/// Parse `PROF_CONF`. Returns the configuration and one message per problem
/// (without the `<heapsample>:` prefix).
pub fn parse(text: &str) -> (Config, Vec<String>) {
    let mut config = Config::default();
    let mut warnings = Vec::new();
    for item in text.split(',').filter(|item| !item.trim().is_empty()) {
        let Some((key, value)) = item.split_once(':') else {
            warnings.push(printable(&format!(
                "PROF_CONF: \"{item}\" is not key:value; ignored"
            )));
            continue;
        };
        if let Err(message) = apply(&mut config, key.trim(), value.trim()) {
            warnings.push(printable(&format!("PROF_CONF: {message}")));
        }
    }
    (config, warnings)
}

/// A warning echoes the user's text: escape control characters so that it
/// stays one line and cannot forge another.
fn printable(message: &str) -> String {
    message
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

fn apply(config: &mut Config, key: &str, value: &str) -> Result<(), String> {
    let defaults = Config::default();
    match key {
        "prof" => config.prof = parse_bool(key, value, defaults.prof)?,
        "prof_active" => config.prof_active = parse_bool(key, value, defaults.prof_active)?,
        "prof_accum" => config.prof_accum = parse_bool(key, value, defaults.prof_accum)?,
        "prof_final" => config.prof_final = parse_bool(key, value, defaults.prof_final)?,
        "prof_leak" => config.prof_leak = parse_bool(key, value, defaults.prof_leak)?,
        "prof_exact" => config.prof_exact = parse_bool(key, value, defaults.prof_exact)?,
        "prof_gdump" => config.prof_gdump = parse_bool(key, value, defaults.prof_gdump)?,
        "lg_prof_sample" => {
            config.lg_prof_sample =
                parse_in_range(key, value, 0, MAX_LG_PROF_SAMPLE as i64, 19)? as u32
        }
        "prof_bt_max" => {
            config.prof_bt_max = parse_in_range(key, value, 1, MAX_BT_MAX as i64, 128)? as u32
        }
        "lg_prof_interval" => {
            config.lg_prof_interval = parse_in_range(key, value, -1, 62, -1)? as i32
        }
        "prof_prefix" => config.prof_prefix = value.to_string(),
        "prof_gdump_step" => config.prof_gdump_step = parse_step(value)?,
        "prof_signal" => config.prof_signal = parse_signal(value)?,
        "prof_unwind" => {
            config.prof_unwind = match value {
                "fast" => Unwinder::Fast,
                "libgcc" => Unwinder::Libgcc,
                _ => {
                    return Err(format!(
                        "prof_unwind:{value} is not fast or libgcc; using fast"
                    ));
                }
            }
        }
        _ => return Err(format!("unknown key \"{key}\" ignored")),
    }
    Ok(())
}

fn parse_bool(key: &str, value: &str, default: bool) -> Result<bool, String> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "{key}:{value} is not true or false; using {default}"
        )),
    }
}

fn parse_in_range(key: &str, value: &str, min: i64, max: i64, default: i64) -> Result<i64, String> {
    match value.parse::<i64>() {
        Ok(number) if (min..=max).contains(&number) => Ok(number),
        _ => Err(format!(
            "{key}:{value} is not an integer in {min}..={max}; using {default}"
        )),
    }
}

/// `67108864`, `64M`, `1G`, `512k` or `25%`.
fn parse_step(value: &str) -> Result<GdumpStep, String> {
    let bad = || {
        format!(
            "prof_gdump_step:{value} is not a byte size (e.g. 64M) or a percentage (e.g. 10%); \
             using max(64M, 10%)"
        )
    };
    if let Some(percent) = value.strip_suffix('%') {
        return match percent.parse::<u32>() {
            Ok(p) if (1..=1000).contains(&p) => Ok(GdumpStep::Percent {
                percent: p,
                floor: 0,
            }),
            _ => Err(bad()),
        };
    }
    let (digits, unit) = match value.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => value.split_at(at),
        None => (value, ""),
    };
    let shift = match unit {
        "" | "B" | "b" => 0,
        "k" | "K" | "KiB" => 10,
        "m" | "M" | "MiB" => 20,
        "g" | "G" | "GiB" => 30,
        _ => return Err(bad()),
    };
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && n.leading_zeros() >= shift => Ok(GdumpStep::Bytes(n << shift)),
        _ => Err(bad()),
    }
}

fn parse_signal(value: &str) -> Result<i32, String> {
    let name = value.trim_start_matches("SIG");
    let signal = match name {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "PROF" => libc::SIGPROF,
        "URG" => libc::SIGURG,
        "WINCH" => libc::SIGWINCH,
        "HUP" => libc::SIGHUP,
        _ => match name.parse::<i32>() {
            Ok(n) if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n) => n,
            _ => {
                return Err(format!(
                    "prof_signal:{value} is not one of USR1, USR2, PROF, URG, WINCH, HUP \
                     or a real-time signal number; no signal dumps"
                ));
            }
        },
    };
    Ok(signal)
}

/// The name `prof_signal` accepts for `signal`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        0 => "none".to_string(),
        libc::SIGUSR1 => "USR1".to_string(),
        libc::SIGUSR2 => "USR2".to_string(),
        libc::SIGPROF => "PROF".to_string(),
        libc::SIGURG => "URG".to_string(),
        libc::SIGWINCH => "WINCH".to_string(),
        libc::SIGHUP => "HUP".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_default() {
        assert_eq!(parse(""), (Config::default(), vec![]));
    }

    #[test]
    fn keys_are_applied() {
        let (config, warnings) = parse(
            "prof_leak:true,lg_prof_sample:0,prof_prefix:/tmp/x/y,prof_bt_max:16,prof_exact:true,\
             lg_prof_interval:20,prof_gdump:true,prof_gdump_step:32M,prof_signal:USR2",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(config.prof_leak && config.prof_exact && config.prof_gdump);
        assert_eq!(config.lg_prof_sample, 0);
        assert_eq!(config.prof_prefix, "/tmp/x/y");
        assert_eq!(config.prof_bt_max, 16);
        assert_eq!(config.lg_prof_interval, 20);
        assert_eq!(config.prof_gdump_step, GdumpStep::Bytes(32 << 20));
        assert_eq!(config.prof_signal, libc::SIGUSR2);
    }

    #[test]
    fn each_bad_item_is_one_warning_and_keeps_the_default() {
        let (config, warnings) =
            parse("nonsense_key:1,lg_prof_sample:banana,prof:maybe,noval,prof_bt_max:100000");
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert_eq!(config, Config::default());
        assert!(warnings[1].contains("lg_prof_sample:banana") && warnings[1].contains("using 19"));
    }

    #[test]
    fn warnings_stay_one_line() {
        let (_, warnings) = parse("prof_leak:x\n<heapsample>: forged");
        assert_eq!(warnings.len(), 1);
        assert!(!warnings[0].contains('\n'), "{}", warnings[0]);
    }

    #[test]
    fn gdump_steps() {
        assert_eq!(DEFAULT_GDUMP_STEP.step_over(0), 64 << 20);
        assert_eq!(DEFAULT_GDUMP_STEP.step_over(10 << 30), 1 << 30);
        assert_eq!(DEFAULT_GDUMP_STEP.step_over(u64::MAX), u64::MAX / 10);
        assert_eq!(
            parse_step("25%"),
            Ok(GdumpStep::Percent {
                percent: 25,
                floor: 0
            })
        );
        assert!(parse_step("99999999999G").is_err());
    }
}
