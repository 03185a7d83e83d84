//! `PROF_CONF`: the profiler's options, in jemalloc's `MALLOC_CONF` syntax
//! (`key:value,key:value`), documented in `MALLOC_CONF.md`.
//!
//! Owns the option table ([`OPTIONS`]: each key's parser, printer and
//! documentation), parsing and the validated [`Config`] with its defaults.
//! Parsing is a pure function so it can be tested (and fuzzed) without a
//! process around it; every problem becomes one warning naming the item and
//! the value used instead. Runs at start-up (inside the first hook call,
//! under the guard) and when a dump is written; allocates, takes no lock.

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
    /// Seconds of wall time between time dumps; 0 is off.
    pub prof_interval_s: u32,
    /// Most automatic dumps one process keeps in its directory; 0 is no
    /// bound.
    pub prof_dump_limit: u32,
    /// Most bytes of automatic dumps one process keeps in its directory; 0
    /// is no bound.
    pub prof_dump_bytes: u64,
    /// Dump at each new high-water mark of the live heap.
    pub prof_gdump: bool,
    /// Minimum growth over the previous high-water dump.
    pub prof_gdump_step: GdumpStep,
    /// Signal that triggers a dump (0: none).
    pub prof_signal: i32,
    /// Which unwinder captures stacks.
    pub prof_unwind: Unwinder,
    /// Which forked children (without `exec`) write an exit dump.
    pub prof_fork_final: ForkFinal,
    /// Which processes started by `exec` from a profiled process write an
    /// exit dump (the same choices, counted from the `exec`).
    pub prof_exec_final: ForkFinal,
    /// Dump when the cgroup's memory use crosses this percentage of its
    /// limit (0: off).
    pub prof_oom_pct: u32,
}

/// How long a forked child must run for `prof_fork_final:lived` to let it
/// write an exit dump: one second.
pub const FORK_FINAL_MIN_LIFE_NS: u64 = 1_000_000_000;

/// Which forked children write an exit dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkFinal {
    /// Those that took a sample since the fork and ran for at least
    /// [`FORK_FINAL_MIN_LIFE_NS`].
    Lived,
    /// Those that took a sample since the fork.
    Sampled,
    /// Every one.
    All,
    /// None.
    None,
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
            prof_interval_s: 0,
            prof_dump_limit: 0,
            prof_dump_bytes: 0,
            prof_gdump: false,
            prof_gdump_step: DEFAULT_GDUMP_STEP,
            prof_signal: 0,
            prof_unwind: Unwinder::Fast,
            prof_fork_final: ForkFinal::Lived,
            prof_exec_final: ForkFinal::All,
            prof_oom_pct: 0,
        }
    }
}

/// The largest `lg_prof_sample`.
pub const MAX_LG_PROF_SAMPLE: u32 = 62;
/// The largest `prof_bt_max`.
pub const MAX_BT_MAX: u32 = 256;
/// The largest `prof_dump_limit`.
pub const MAX_DUMP_LIMIT: i64 = 1_000_000;
/// The longest `prof_interval_s`: a year.
pub const MAX_INTERVAL_S: i64 = 365 * 24 * 3600;

/// One `PROF_CONF` key: how it is parsed, written back and documented. The
/// table [`OPTIONS`] drives parsing, the warnings, [`Config::describe`] and
/// the option list in MALLOC_CONF.md ([`options_markdown`]); the defaults
/// are those of [`Config::default`].
pub struct OptionSpec {
    /// The key.
    pub key: &'static str,
    /// The value's type, as MALLOC_CONF.md lists it.
    pub kind: &'static str,
    /// The accepted values, as MALLOC_CONF.md lists them ("" when the type
    /// says it all).
    pub range: &'static str,
    /// A note on the default for MALLOC_CONF.md, or "".
    pub default_note: &'static str,
    /// What a bad value falls back to, for the warning; "" for
    /// "using `<the default>`".
    on_error: &'static str,
    /// Set the option from `value`, or say what is wrong with it.
    set: fn(&mut Config, &str) -> Result<(), String>,
    /// The option's value in a configuration, as PROF_CONF writes it.
    get: fn(&Config) -> String,
}

impl OptionSpec {
    /// The option's value in `config`, as PROF_CONF writes it.
    pub fn value_in(&self, config: &Config) -> String {
        (self.get)(config)
    }

    /// The warning for a bad `value`, whose problem is `reason`.
    fn warning(&self, value: &str, reason: &str) -> String {
        let fallback = if self.on_error.is_empty() {
            format!("using {}", self.value_in(&Config::default()))
        } else {
            self.on_error.to_string()
        };
        format!("{}:{value} {reason}; {fallback}", self.key)
    }
}

/// A `bool` option: `true`/`false` (or `1`/`0`).
macro_rules! bool_option {
    ($key:ident) => {
        OptionSpec {
            key: stringify!($key),
            kind: "bool",
            range: "",
            default_note: "",
            on_error: "",
            set: |c, v| parse_bool(v).map(|value| c.$key = value),
            get: |c| if c.$key { "true" } else { "false" }.to_string(),
        }
    };
}

/// An option that takes one of a few names, each naming a variant of `$type`;
/// `$kind` lists them as the documentation shows them (`` `a`, `b` or `c` ``),
/// and a value not among them is refused with "is not a, b or c".
macro_rules! choice_option {
    ($key:ident, $kind:literal, $type:ident { $($name:literal => $variant:ident),+ $(,)? }) => {
        OptionSpec {
            key: stringify!($key),
            kind: $kind,
            range: "",
            default_note: "",
            on_error: "",
            set: |c, v| {
                c.$key = match v {
                    $($name => $type::$variant,)+
                    _ => return Err(format!("is not {}", $kind.replace('`', ""))),
                };
                Ok(())
            },
            get: |c| {
                match c.$key {
                    $($type::$variant => $name,)+
                }
                .to_string()
            },
        }
    };
}

/// Every option, in the order of the documentation and of
/// [`Config::describe`].
pub static OPTIONS: [OptionSpec; 20] = [
    bool_option!(prof),
    bool_option!(prof_active),
    OptionSpec {
        key: "lg_prof_sample",
        kind: "integer",
        range: "0–62",
        default_note: "512 KiB",
        on_error: "",
        set: |c, v| {
            parse_in_range(v, 0, MAX_LG_PROF_SAMPLE as i64).map(|n| c.lg_prof_sample = n as u32)
        },
        get: |c| c.lg_prof_sample.to_string(),
    },
    bool_option!(prof_accum),
    bool_option!(prof_final),
    bool_option!(prof_leak),
    OptionSpec {
        key: "prof_prefix",
        kind: "string",
        range: "any path prefix; empty disables automatic dumps",
        default_note: "",
        on_error: "",
        set: |c, v| {
            c.prof_prefix = v.to_string();
            Ok(())
        },
        get: |c| c.prof_prefix.clone(),
    },
    OptionSpec {
        key: "prof_bt_max",
        kind: "integer",
        range: "1–256",
        default_note: "",
        on_error: "",
        set: |c, v| parse_in_range(v, 1, MAX_BT_MAX as i64).map(|n| c.prof_bt_max = n as u32),
        get: |c| c.prof_bt_max.to_string(),
    },
    bool_option!(prof_exact),
    OptionSpec {
        key: "lg_prof_interval",
        kind: "integer",
        range: "-1–62",
        default_note: "off",
        on_error: "",
        set: |c, v| parse_in_range(v, -1, 62).map(|n| c.lg_prof_interval = n as i32),
        get: |c| c.lg_prof_interval.to_string(),
    },
    OptionSpec {
        key: "prof_interval_s",
        kind: "integer",
        range: "0–31536000",
        default_note: "off",
        on_error: "",
        set: |c, v| parse_in_range(v, 0, MAX_INTERVAL_S).map(|n| c.prof_interval_s = n as u32),
        get: |c| c.prof_interval_s.to_string(),
    },
    OptionSpec {
        key: "prof_dump_limit",
        kind: "integer",
        range: "0–1000000",
        default_note: "no bound",
        on_error: "",
        set: |c, v| parse_in_range(v, 0, MAX_DUMP_LIMIT).map(|n| c.prof_dump_limit = n as u32),
        get: |c| c.prof_dump_limit.to_string(),
    },
    OptionSpec {
        key: "prof_dump_bytes",
        kind: "size",
        range: "0 or a byte size (`512k`, `64M`, `2G`)",
        default_note: "no bound",
        on_error: "",
        set: |c, v| parse_size_or_zero(v).map(|n| c.prof_dump_bytes = n),
        get: |c| c.prof_dump_bytes.to_string(),
    },
    bool_option!(prof_gdump),
    OptionSpec {
        key: "prof_gdump_step",
        kind: "size or percentage",
        range: "≥ 1 byte, 1–1000 %",
        default_note: "at least 64 MiB",
        on_error: "using max(64M, 10%)",
        set: |c, v| parse_step(v).map(|value| c.prof_gdump_step = value),
        get: |c| describe_step(c.prof_gdump_step),
    },
    OptionSpec {
        key: "prof_signal",
        kind: "signal name",
        range: "`USR1`, `USR2`, `PROF`, `URG`, `WINCH`, `HUP`, or a real-time signal number",
        default_note: "",
        on_error: "no signal dumps",
        set: |c, v| parse_signal(v).map(|value| c.prof_signal = value),
        get: |c| signal_name(c.prof_signal),
    },
    choice_option!(prof_unwind, "`fast` or `libgcc`", Unwinder {
        "fast" => Fast,
        "libgcc" => Libgcc,
    }),
    choice_option!(prof_fork_final, "`lived`, `sampled`, `all` or `none`", ForkFinal {
        "lived" => Lived,
        "sampled" => Sampled,
        "all" => All,
        "none" => None,
    }),
    choice_option!(prof_exec_final, "`lived`, `sampled`, `all` or `none`", ForkFinal {
        "lived" => Lived,
        "sampled" => Sampled,
        "all" => All,
        "none" => None,
    }),
    OptionSpec {
        key: "prof_oom_pct",
        kind: "integer",
        range: "0–100",
        default_note: "off",
        on_error: "",
        set: |c, v| parse_in_range(v, 0, 100).map(|value| c.prof_oom_pct = value as u32),
        get: |c| c.prof_oom_pct.to_string(),
    },
];

impl Config {
    /// The options as `key:value,...`, recorded in every dump.
    /// Built by appending (no `format!` per option: every exit dump of
    /// every short-lived process writes it).
    pub fn describe(&self) -> String {
        let mut out = String::with_capacity(384);
        for option in &OPTIONS {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(option.key);
            out.push(':');
            out.push_str(&option.value_in(self));
        }
        out
    }
}

/// The option list of MALLOC_CONF.md: one row per option with its type,
/// real default and range.
pub fn options_markdown() -> String {
    let defaults = Config::default();
    let mut out = String::from("| key | type | default | range |\n|---|---|---|---|\n");
    for option in &OPTIONS {
        let mut default = format!("`{}`", option.value_in(&defaults));
        if !option.default_note.is_empty() {
            let _ = write!(default, " ({})", option.default_note);
        }
        let _ = writeln!(
            out,
            "| [`{key}`](#{key}) | {} | {default} |{}|",
            option.kind,
            if option.range.is_empty() {
                " ".to_string()
            } else {
                format!(" {} ", option.range)
            },
            key = option.key
        );
    }
    out
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
    let Some(option) = OPTIONS.iter().find(|option| option.key == key) else {
        return Err(format!("unknown key \"{key}\" ignored"));
    };
    (option.set)(config, value).map_err(|reason| option.warning(value, &reason))
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err("is not true or false".to_string()),
    }
}

fn parse_in_range(value: &str, min: i64, max: i64) -> Result<i64, String> {
    match value.parse::<i64>() {
        Ok(number) if (min..=max).contains(&number) => Ok(number),
        _ => Err(format!("is not an integer in {min}..={max}")),
    }
}

/// `67108864`, `64M`, `1G`, `512k` or `25%`.
fn parse_step(value: &str) -> Result<GdumpStep, String> {
    let bad = || "is not a byte size (e.g. 64M) or a percentage (e.g. 10%)".to_string();
    if let Some(percent) = value.strip_suffix('%') {
        return match percent.parse::<u32>() {
            Ok(p) if (1..=1000).contains(&p) => Ok(GdumpStep::Percent {
                percent: p,
                floor: 0,
            }),
            _ => Err(bad()),
        };
    }
    parse_size(value).map(GdumpStep::Bytes).ok_or_else(bad)
}

/// A positive byte size: `67108864`, `64M`, `1G`, `512k` (or `KiB`, `MiB`,
/// `GiB`); None for anything else, or one that does not fit 64 bits.
fn parse_size(value: &str) -> Option<u64> {
    let (digits, unit) = match value.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => value.split_at(at),
        None => (value, ""),
    };
    let shift = match unit {
        "" | "B" | "b" => 0,
        "k" | "K" | "KiB" => 10,
        "m" | "M" | "MiB" => 20,
        "g" | "G" | "GiB" => 30,
        _ => return None,
    };
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && n.leading_zeros() >= shift => Some(n << shift),
        _ => None,
    }
}

/// `0` (off) or a byte size as [`parse_size`] reads it.
fn parse_size_or_zero(value: &str) -> Result<u64, String> {
    if value == "0" {
        return Ok(0);
    }
    parse_size(value).ok_or_else(|| "is not 0 or a byte size (e.g. 512k, 64M, 2G)".to_string())
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
                return Err("is not one of USR1, USR2, PROF, URG, WINCH, HUP \
                     or a real-time signal number"
                    .to_string());
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
    fn dump_bounds_take_a_count_and_a_size() {
        let (config, warnings) = parse("prof_dump_limit:50,prof_dump_bytes:64M");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            (config.prof_dump_limit, config.prof_dump_bytes),
            (50, 64 << 20)
        );
        assert_eq!(parse("prof_dump_bytes:0").0.prof_dump_bytes, 0);
        assert_eq!(parse("prof_dump_bytes:512k").0.prof_dump_bytes, 512 << 10);
        let (config, warnings) = parse("prof_dump_bytes:lots,prof_dump_limit:-1");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!((config.prof_dump_limit, config.prof_dump_bytes), (0, 0));
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

    /// The lines of MALLOC_CONF.md between the generated-list markers.
    fn documented_list(doc: &str) -> Option<&str> {
        let start = doc.find(LIST_START)? + LIST_START.len();
        let end = start + doc[start..].find(LIST_END)?;
        Some(doc[start..end].trim_start_matches('\n'))
    }

    const LIST_START: &str =
        "<!-- option list: generated from options/src/config.rs (OPTIONS) -->\n";
    const LIST_END: &str = "<!-- end of option list -->";

    /// MALLOC_CONF.md lists every key with its real default, exactly as the
    /// option table generates it. `HEAPSAMPLE_UPDATE_DOCS=1 cargo test -p
    /// heapsample-options` rewrites the list after a change to the table.
    #[test]
    fn malloc_conf_md_lists_every_option_with_its_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../MALLOC_CONF.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let generated = options_markdown();
        let listed = documented_list(&doc).expect("MALLOC_CONF.md has the option list markers");
        if listed != generated && std::env::var_os("HEAPSAMPLE_UPDATE_DOCS").is_some() {
            let updated = doc.replacen(listed, &generated, 1);
            std::fs::write(path, updated).unwrap();
            return;
        }
        assert_eq!(
            listed, generated,
            "MALLOC_CONF.md's option list is stale; regenerate it with HEAPSAMPLE_UPDATE_DOCS=1"
        );
        let defaults = Config::default();
        for option in &OPTIONS {
            assert!(
                doc.contains(&format!("\n## {}\n", option.key)),
                "MALLOC_CONF.md has no section for {}",
                option.key
            );
            assert!(listed.contains(&format!(
                "| [`{key}`](#{key}) | {} | `{}`",
                option.kind,
                option.value_in(&defaults),
                key = option.key
            )));
        }
    }

    #[test]
    fn describe_round_trips_through_parse() {
        let config = Config {
            lg_prof_sample: 7,
            prof_prefix: "/tmp/p".to_string(),
            prof_signal: libc::SIGUSR1,
            prof_unwind: Unwinder::Libgcc,
            prof_gdump_step: GdumpStep::Bytes(1 << 20),
            ..Config::default()
        };
        let (parsed, warnings) = parse(&config.describe());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(parsed, config);
        assert!(
            config
                .describe()
                .starts_with("prof:true,prof_active:true,lg_prof_sample:7,")
        );
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
