use crate::Failure;
use clap::Args;
use std::path::PathBuf;
#[derive(Args)]
pub struct AttachArgs {
    pid: i32,
}
pub fn attach(_library: Option<PathBuf>, _args: AttachArgs) -> Result<u8, Failure> {
    Err(Failure::new("todo"))
}
