use crate::Failure;
use clap::Args;
#[derive(Args)]
pub struct PidArgs {
    pid: i32,
}
pub fn detach(_a: PidArgs) -> Result<u8, Failure> {
    Err(Failure::new("todo"))
}
pub fn dump(_a: PidArgs) -> Result<u8, Failure> {
    Err(Failure::new("todo"))
}
pub fn status(_a: PidArgs) -> Result<u8, Failure> {
    Err(Failure::new("todo"))
}
pub fn set_active(_a: PidArgs, _on: bool) -> Result<u8, Failure> {
    Err(Failure::new("todo"))
}
