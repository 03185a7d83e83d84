//! `heapdiff modules DUMP...`: per module of the dumps, its build-id and
//! where its names came from (a copy collected beside the dumps, a
//! `--debug-dir`, the system's debug directory, the file at its recorded
//! path) or why there are none.
//!
//! Owns the command's arguments and its text; symbolization is the
//! pipeline's, as for every other view.

use crate::print_notice;
use crate::view_args::ViewArgs;
use clap::Args;
use heapdiff::Result;
use heapdiff::model::Metric;
use heapdiff::pipeline::{Loaded, Session};
use heapdiff::symbols::LocationTable;
use std::path::PathBuf;

/// Where each module's names came from, or why there are none.
#[derive(Args, Debug)]
pub struct ModulesArgs {
    /// The dumps whose modules to list.
    #[arg(required = true, num_args = 1..)]
    pub dumps: Vec<PathBuf>,
    #[command(flatten)]
    pub view: ViewArgs,
}

/// Run `heapdiff modules`.
pub fn run(args: &ModulesArgs) -> Result<()> {
    let loaded = Loaded::read(format!("{} dumps", args.dumps.len()), &args.dumps)?;
    let settings = args.view.settings(Metric::InuseSpace, true);
    let session = Session::open(
        LocationTable::default(),
        loaded,
        None,
        &settings,
        &mut print_notice,
    )?;
    let table = session.into_table();
    for module in &table.modules {
        let build_id = if module.build_id.is_empty() {
            "no build-id".to_string()
        } else {
            heapdiff::symbols::hex(&module.build_id)
        };
        let names = if module.names_from.is_empty() {
            "no sampled frame in it"
        } else {
            &module.names_from
        };
        println!("{}  [{build_id}]  {names}", module.path);
    }
    Ok(())
}
