//! `heapdiff serve`: its arguments, handed to the server crate.

use clap::Args;
use heapdiff::model::BuildOptions;
use heapdiff::model::NotMine;
use heapdiff::pipeline::Settings;
use heapdiff::symbols::{NameStyle, SymbolizeOptions};
use heapdiff_serve::Config;
use std::net::IpAddr;
use std::path::PathBuf;

/// Browse dumps in a browser: list, timelines, flamegraphs, diffs, pprof.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Directories to watch for dumps (and single dump files). Default: `.`.
    pub paths: Vec<PathBuf>,
    /// TCP port; 0 picks a free one.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Address to listen on. Anything but loopback exposes the dumps.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Also answer requests for this host name (the server answers to
    /// localhost and its address only, against DNS rebinding); `*` for
    /// any. Repeatable.
    #[arg(long, value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Also look for modules and debug files here. Repeatable.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Keep the allocator's own frames at the leaf of each stack.
    #[arg(long)]
    pub keep_allocator_frames: bool,
    /// Show whole signatures first (the viewer switches between short and
    /// full names either way).
    #[arg(long)]
    pub full_names: bool,
    /// Also treat as not the program's own code when naming program
    /// frames: a module (an entry with `/` or `.so`) or a function name
    /// prefix, as `heapdiff --not-mine`. Repeatable.
    #[arg(long, value_name = "PREFIX|MODULE")]
    pub not_mine: Vec<String>,
    /// Every named frame is the program's own, as `heapdiff --all-mine`.
    #[arg(long)]
    pub all_mine: bool,
}

impl ServeArgs {
    /// The server's configuration: no progress bar (no terminal to draw
    /// on); dumps of different programs are compared only when a page asks
    /// to (`allow_mismatch=1`, its "compare anyway" link).
    pub fn config(&self) -> Config {
        let symbolize = SymbolizeOptions::with_debug_dirs(self.debug_dir.clone());
        Config {
            paths: self.paths.clone(),
            bind: self.bind,
            port: self.port,
            allow_hosts: self.allow_host.clone(),
            settings: Settings {
                symbolize,
                build: BuildOptions {
                    keep_allocator_frames: self.keep_allocator_frames,
                    ..BuildOptions::default()
                },
                names: if self.full_names {
                    NameStyle::Full
                } else {
                    NameStyle::Short
                },
                allow_mismatch: false,
                not_mine: NotMine {
                    extra: self.not_mine.clone(),
                    all_mine: self.all_mine,
                },
                ..Settings::default()
            },
        }
    }
}
