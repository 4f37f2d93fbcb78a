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

#[test]
fn sharded_rule_streams_many_blocks_with_the_bits_of_the_whole_rule() {
    // 7000 rows: more distinct rows per rank than one broadcast block, copies across ranks
    // (one with -0.0 for +0.0), a constant column and an outlier row.
    let x = Mat::from_fn(7000, 4, |i, j| {
        let src = if i % 5 == 4 { i / 3 } else { i };
        match j {
            2 => 1.5,
            _ if i == 4321 => 1e6,
            _ if src == 10 && j == 0 => {
                if i == 10 {
                    0.0
                } else {
                    -0.0
                }
            }
            _ => ((src * (j + 2)) as f64 * 0.37).sin() * (1.0 + (src % 7) as f64),
        }
    });
    let whole = bandwidth_estimate(x.as_ref(), 20.0, 20_000, &mut Xoshiro256PlusPlus::seed_from_u64(8)).unwrap();
    assert!(whole.distinct_rows < whole.rows && !whole.exact);
    for p in [2, 3] {
        let got = ThreadGroup::run(p, |comm| {
            let shard = RowShard::balanced(7000, comm.rank(), comm.size());
            let local = x.as_ref().subrows(shard.first, shard.rows);
            bandwidth_estimate_sharded(local, 20.0, 20_000, &mut Xoshiro256PlusPlus::seed_from_u64(8), comm).unwrap()
        });
        assert!(got.iter().all(|b| *b == whole), "P = {p}: {got:?} vs {whole:?}");
    }
}

#[test]
fn sharded_rule_gives_every_rank_the_same_error() {
    // A NaN on the last rank: every rank names its global row.
    let mut x = Mat::from_fn(90, 3, |i, j| (i * 3 + j) as f64);
    x[(80, 1)] = f64::NAN;
    let whole = bandwidth_estimate(x.as_ref(), 20.0, 100, &mut Xoshiro256PlusPlus::seed_from_u64(1)).unwrap_err();
    let got = ThreadGroup::run(3, |comm| {
        let shard = RowShard::balanced(90, comm.rank(), comm.size());
        let local = x.as_ref().subrows(shard.first, shard.rows);
        bandwidth_estimate_sharded(local, 20.0, 100, &mut Xoshiro256PlusPlus::seed_from_u64(1), comm).unwrap_err()
    });
    assert!(got.iter().all(|e| e.to_string() == whole.to_string()), "{got:?} vs {whole:?}");
    // Every row equal across the ranks (each rank has one distinct row): one distinct row.
    let same = Mat::from_fn(40, 2, |_, j| j as f64);
    let got = ThreadGroup::run(2, |comm| {
        let shard = RowShard::balanced(40, comm.rank(), comm.size());
        let local = same.as_ref().subrows(shard.first, shard.rows);
        bandwidth_estimate_sharded(local, 20.0, 100, &mut Xoshiro256PlusPlus::seed_from_u64(1), comm).unwrap_err()
    });
    assert!(got.iter().all(|e| matches!(e, stolr_estimators::EstimatorError::SingleDistinctRow { n: 40 })), "{got:?}");
}
