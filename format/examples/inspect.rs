//! Print a dump's header, totals and largest stacks (raw addresses).
//! `cargo run -p heapsample-format --example inspect -- FILE`

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: inspect FILE");
        std::process::exit(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let dump = match heapsample_format::decode(&bytes) {
        Ok(dump) => dump,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "pid {} exe {} trigger {:?} seq {} period 2^{} modules {} threads {} stacks {}",
        dump.pid,
        dump.executable,
        dump.trigger,
        dump.seq,
        dump.lg_sample_period,
        dump.modules.len(),
        dump.threads.len(),
        dump.stacks.len()
    );
    println!("{:?}", dump.totals);
    let mut stacks = dump.stacks.clone();
    stacks.sort_by_key(|s| std::cmp::Reverse(s.live_bytes));
    for stack in stacks.iter().take(10) {
        let frames: Vec<String> = stack
            .frames
            .iter()
            .take(6)
            .map(|f| format!("{f:#x}"))
            .collect();
        println!(
            "live {}/{}B alloc {}/{}B thread {} [{}]",
            stack.live_objects,
            stack.live_bytes,
            stack.alloc_objects,
            stack.alloc_bytes,
            stack.thread,
            frames.join(" ")
        );
    }
    for module in &dump.modules {
        println!(
            "{:#x} {:?} {} {:?}",
            module.load_bias,
            module.ranges.first(),
            module.path,
            (module.first_epoch, module.last_epoch)
        );
    }
}
