//! After `invalidate_all_caches`, every cache recomputes its rules, and captures still
//! match libgcc. In its own test binary: invalidation affects every cache in the process.

mod common;

use common::{assert_same_stack, chain};
use heapsample_unwind::{
    RuleCache, SharedRuleCache, capture, capture_layered, capture_libgcc, capture_shared,
    invalidate_all_caches,
};

static SHARED: SharedRuleCache = SharedRuleCache::new();

#[test]
fn recomputes_rules_after_invalidation() {
    let mut private = <RuleCache>::new_boxed();
    let mut small = RuleCache::<64>::new_boxed();
    let mut misses = Vec::new();
    let mut libgcc_stacks = Vec::new();
    // One call site, so every round sees the same return addresses.
    for round in 0..std::hint::black_box(4) {
        if round == 2 {
            invalidate_all_caches();
        }
        chain(30, &mut || {
            let mut buffers = [[0u64; 128]; 4];
            let [a, b, c, d] = &mut buffers;
            let private_len = capture(&mut private, a);
            let shared_len = capture_shared(&SHARED, b);
            let layered_len = capture_layered(&mut small, &SHARED, c);
            let libgcc_len = capture_libgcc(d);
            let libgcc = &d[..libgcc_len];
            assert_same_stack(
                &a[..private_len],
                libgcc,
                &format!("round {round}, private"),
            );
            assert_same_stack(&b[..shared_len], libgcc, &format!("round {round}, shared"));
            assert_same_stack(
                &c[..layered_len],
                libgcc,
                &format!("round {round}, layered"),
            );
            libgcc_stacks.push(libgcc.to_vec());
            0
        });
        misses.push(private.misses());
    }
    // Rounds are meant to share one call site, but the optimiser may duplicate the
    // loop body, giving this test function's own frame a new return address: allow
    // that one new rule per warm round.
    let new_rules: Vec<u64> = misses.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(misses[0] > 30, "cold round computed {} rules", misses[0]);
    assert!(new_rules[0] <= 1, "warm before invalidation: {misses:?}");
    assert!(
        new_rules[1] > 30,
        "invalidation did not clear the private cache: misses after each round {misses:?}"
    );
    assert!(
        new_rules[2] <= 1,
        "warm again after invalidation: {misses:?}"
    );
    // Same depth every round (the code layout of the rounds may differ under optimisation).
    assert!(
        libgcc_stacks
            .windows(2)
            .all(|pair| pair[0].len() == pair[1].len())
    );
}
