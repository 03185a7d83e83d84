//! Bounded property tests with a seeded generator: damaged files never
//! panic the loader, and odd but decodable dumps (random frames, modules,
//! epochs, huge counts, any sampling period) go through symbolization and
//! every renderer without a panic.

mod common;

use common::{Fixture, Lcg, dump, module, stack};
use heapdiff::input::load;
use heapdiff::model::{BuildOptions, Metric, Profile};
use heapdiff::render::folded::DiffColumns;
use heapdiff::render::pprof::PprofOptions;
use heapdiff::render::svg::SvgOptions;
use heapdiff::render::{self, Base, View};
use heapdiff::symbols::{LocationTable, SymbolizeOptions};
use heapsample_format::{Dump, Module, Stack, encode};

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
    Stack {
        frames,
        thread: rng.below(4) as u32,
        epoch: rng.below(3) as u32,
        live_objects: count(rng),
        live_bytes: count(rng).saturating_mul(64),
        live_usable_bytes: count(rng),
        alloc_objects: count(rng),
        alloc_bytes: count(rng).saturating_mul(100),
        live: heapsample_format::legacy_weights(count(rng), count(rng).saturating_mul(64), 1),
        alloc: heapsample_format::legacy_weights(count(rng), count(rng), 1 << 19),
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

fn render_everything(table: &LocationTable, new: &Profile, base: &Profile, exe: &str) {
    for metric in [
        Metric::InuseSpace,
        Metric::InuseObjects,
        Metric::AllocSpace,
        Metric::AllocObjects,
    ] {
        for with_base in [false, true] {
            let view = View {
                table,
                new,
                new_name: "new",
                base: with_base.then_some(Base {
                    profile: base,
                    name: "base",
                }),
                metric,
            };
            let _ = render::folded::render(&view, DiffColumns::Delta);
            let _ = render::folded::render(&view, DiffColumns::BaseAndNew);
            let _ = render::text::render(&view, 5);
            let _ = render::svg::render(&view, &SvgOptions::default());
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
        let mut table = LocationTable::default();
        let new_stacks = table.intern_dump(&new_dump);
        let base_stacks = table.intern_dump(&base_dump);
        table.symbolize(&SymbolizeOptions::default(), &mut |_| {});
        let options = BuildOptions::default();
        let new = Profile::build(&new_dump, &new_stacks, &table, options);
        let base = Profile::build(&base_dump, &base_stacks, &table, options);
        render_everything(&table, &new, &base, &exe);
    }
}
