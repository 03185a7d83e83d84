//! The options an attached process cannot honour, refused before anything
//! changes in it.

use crate::config;

/// Options an attached process cannot honour, refused before anything
/// changes (by the `heapsample` command before it loads the library, and by
/// the library before it takes over).
pub fn check_options(options: &str) -> Result<(), String> {
    let (config, warnings) = config::parse(options);
    if let Some(warning) = warnings.first() {
        return Err(warning.clone());
    }
    if !config.prof {
        return Err("prof:false turns the profiler off".into());
    }
    if config.prof_exact {
        return Err(
            "prof_exact needs every block's allocation, which an attach cannot see: \
                    start the program under the profiler (heapsample run)"
                .into(),
        );
    }
    if config.prof_signal != 0 {
        return Err("prof_signal would take a signal the program may own: \
                    use `heapsample dump PID` instead"
            .into());
    }
    Ok(())
}
