//! The width rule on rows split across ranks gives the bits of the rule on the whole data,
//! duplicates across ranks included.

use faer::Mat;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_comm::{Communicator, RowShard, ThreadGroup};
use stolr_estimators::{bandwidth_estimate, bandwidth_estimate_sharded};

#[test]
fn sharded_rule_equals_the_whole_rule() {
    // 300 rows, every third a copy of an earlier row (copies fall on other ranks too).
    let x = Mat::from_fn(300, 3, |i, j| {
        let src = if i % 3 == 2 { i / 7 } else { i };
        ((src * (j + 3)) as f64 * 0.61).sin()
    });
    for pairs in [1_000, 1_000_000] {
        let whole = bandwidth_estimate(x.as_ref(), 20.0, pairs, &mut Xoshiro256PlusPlus::seed_from_u64(4)).unwrap();
        assert!(whole.distinct_rows < whole.rows);
        assert_eq!(whole.exact, pairs == 1_000_000);
        for p in [1, 2, 3] {
            let got = ThreadGroup::run(p, |comm| {
                let shard = RowShard::balanced(300, comm.rank(), comm.size());
                let local = x.as_ref().subrows(shard.first, shard.rows);
                bandwidth_estimate_sharded(local, 20.0, pairs, &mut Xoshiro256PlusPlus::seed_from_u64(4), comm).unwrap()
            });
            assert!(got.iter().all(|b| *b == whole), "P = {p}: {got:?} vs {whole:?}");
        }
    }
}
