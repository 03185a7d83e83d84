//! Bounded property tests with a seeded generator: damaged files never
//! panic the loader, and odd but decodable dumps (random frames, modules,
//! epochs, huge counts, any sampling period) go through symbolization and
//! every renderer without a panic.

mod common;

use common::{Fixture, Lcg, dump, module, stack};
use heapdiff::input::{Input, load};
use heapdiff::model::Metric;
use heapdiff::pipeline::{Loaded, Session, Settings};
use heapdiff::render;
use heapdiff::render::folded::DiffColumns;
use heapdiff::render::pprof::PprofOptions;
use heapdiff::render::svg::SvgOptions;
use heapdiff::symbols::LocationTable;
use heapsample_format::{Dump, Module, Stack, encode};
use std::path::PathBuf;

#[test]
fn two_thousand_byte_flips_are_errors_not_panics() {
    let fixture = Fixture::new("flips", &["-no-pie"]);
    let exe = fixture.binary.display().to_string();
    let good = encode(&dump(
        &exe,
        19,
        vec![module(&fixture.binary, 0)],
        vec![
            stack(fixture.leaf_stack(0), 3, 100),
            stack(fixture.inline_stack(0), 1, 7),
        ],
    ));
    let path = fixture.dir.join("flipped.prof");
    let mut rng = Lcg(2024);
    for round in 0..2000 {
        let mut bytes = good.clone();
        let flips = 1 + rng.below(3);
        for _ in 0..flips {
            let index = rng.below(bytes.len() as u64) as usize;
            bytes[index] ^= 1 + rng.below(255) as u8;
        }
        if round % 10 == 0 {
            let cut = rng.below(bytes.len() as u64) as usize;
            bytes.truncate(cut);
        }
        std::fs::write(&path, &bytes).unwrap();
        let error = load(&path).expect_err("a damaged dump must not load");
        let text = error.to_string();
        assert!(
            text.starts_with(&path.display().to_string()) && !text.contains('\n'),
            "{text}"
        );
    }
}

fn random_stack(rng: &mut Lcg, addresses: &[u64]) -> Stack {
    let depth = rng.below(6) as usize;
    let frames = (0..depth)
        .map(|_| match rng.below(4) {
            0 => rng.next() << 11,
            _ => addresses[rng.below(addresses.len() as u64) as usize],
        })
        .collect();
    let huge = rng.below(10) == 0;
    let count = |rng: &mut Lcg| {
        if huge {
            u64::MAX - rng.below(3)
        } else {
            rng.below(50)
        }
    };
    // Weights of the stack's own counts (at least one unit per sample, as
    // the decoder requires), the counts themselves random and unrelated.
    let (live_objects, live_bytes) = (count(rng), count(rng).saturating_mul(64));
    let (alloc_objects, alloc_bytes) = (count(rng), count(rng).saturating_mul(100));
    Stack {
        frames,
        thread: rng.below(4) as u32,
        epoch: rng.below(3) as u32,
        live_objects,
        live_bytes,
        live_usable_bytes: count(rng),
        alloc_objects,
        alloc_bytes,
        live: heapsample_format::legacy_weights(live_objects, live_bytes, 1),
        alloc: heapsample_format::legacy_weights(alloc_objects, alloc_bytes, 1 << 19),
        lifetimes: vec![],
    }
}

fn random_modules(rng: &mut Lcg, fixture: &Fixture) -> Vec<Module> {
    let mut real = module(&fixture.binary, 0);
    real.last_epoch = (rng.below(2) == 0).then_some(1);
    let mut gone = module(&fixture.binary, 0x7000_0000);
    gone.path = "/nonexistent/libgone.so".into();
    gone.first_epoch = rng.below(2) as u32;
    let mut odd = gone.clone();
    odd.path = String::new();
    odd.ranges = vec![(u64::MAX - 10, 3), (5, 5)];
    odd.build_id = vec![];
    vec![real, gone, odd]
}

/// Both dumps through the pipeline, every format, every metric, with and
/// without the base.
fn render_everything(new: Dump, base: Dump, exe: &str) {
    for metric in Metric::ALL {
        for with_base in [false, true] {
            let input = |name: &str, dump: &Dump| {
                Loaded::one(
                    name.to_string(),
                    Input {
                        path: PathBuf::from(name),
                        dump: dump.clone(),
                        version: heapsample_format::VERSION,
                        foreign: None,
                    },
                )
            };
            let settings = Settings {
                metric,
                allow_mismatch: true,
                ..Settings::default()
            };
            let session = Session::open(
                LocationTable::default(),
                input("new", &new),
                with_base.then(|| input("base", &base)),
                &settings,
                &mut |_| {},
            )
            .expect("a session");
            let view = session.view();
            let _ = render::folded::render(&view, DiffColumns::Delta);
            let _ = render::folded::render(&view, DiffColumns::BaseAndNew);
            let _ = render::text::render(&view, 5);
            let _ = render::json::render(&view);
            let _ = render::svg::render(&view, &SvgOptions::default());
            let _ = render::html::page(&render::html::model(&view));
            let pprof = PprofOptions {
                executable: exe.to_string(),
                ..PprofOptions::default()
            };
            assert!(render::pprof::render(&view, &pprof).is_ok());
        }
    }
}

#[test]
fn odd_but_decodable_dumps_render_without_panic() {
    let fixture = Fixture::new("odd", &["-no-pie"]);
    let exe = fixture.binary.display().to_string();
    let mut addresses = fixture.leaf_stack(0);
    addresses.extend(fixture.inline_stack(0));
    addresses.extend([0, 1, u64::MAX]);
    let mut rng = Lcg(77);
    for _ in 0..60 {
        let modules = random_modules(&mut rng, &fixture);
        let make = |rng: &mut Lcg| -> Dump {
            let stacks = (0..rng.below(8))
                .map(|_| random_stack(rng, &addresses))
                .collect();
            let mut d = dump(&exe, rng.below(63) as u32, modules.clone(), vec![]);
            d.stacks = stacks;
            d
        };
        let (base_dump, new_dump) = (make(&mut rng), make(&mut rng));
        // Through the file format and back, as the tool reads them.
        let base_dump = heapsample_format::decode(&encode(&base_dump)).unwrap();
        render_everything(new_dump, base_dump, &exe);
    }
}
