//! spm tests: the contiguous and gapped miners against the brute-force reference on thousands
//! of random inputs, long runs, SPMF parsing, and the known answers on the shared benchmark
//! data sets.

// Helpers outside `#[test]` functions: unwrap on test data is fine.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use chainweaver_analyzer::spm::{
    ContiguousOptions, GappedOptions, Occurrence, SequenceDb, contiguous, gapped, reference,
};

use crate::shared_datasets;

/// splitmix64: a tiny seeded generator, so every failure reproduces from its case number.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random SPMF text: 0..=6 sequences of 0..=max_len items over a small alphabet, with
/// immediate repeats, empty sequences, blank lines and sometimes a trailing empty line.
fn random_spmf(rng: &mut Rng, max_len: u64) -> Vec<u8> {
    let alphabet = 1 + rng.below(4);
    let labels: Vec<u64> = (0..alphabet).map(|i| i * (1 + rng.below(3)) + 1).collect();
    let mut text = String::new();
    for _ in 0..rng.below(7) {
        if rng.below(8) == 0 {
            text.push('\n');
        }
        let len = rng.below(max_len + 1);
        let mut prev: Option<u64> = None;
        for _ in 0..len {
            let item = match prev {
                Some(p) if rng.below(3) == 0 => p,
                _ => labels[rng.below(alphabet) as usize],
            };
            text.push_str(&format!("{item} -1 "));
            prev = Some(item);
        }
        text.push_str("-2\n");
    }
    if rng.below(3) == 0 {
        text.push('\n');
    }
    text.into_bytes()
}

fn contiguous_map(db: &SequenceDb, options: &ContiguousOptions) -> BTreeMap<Vec<u32>, (u32, u64)> {
    let patterns = contiguous::mine(db, options).unwrap();
    let n = patterns.len();
    let map: BTreeMap<_, _> = patterns
        .into_iter()
        .map(|p| (p.items, (p.support, p.occurrences)))
        .collect();
    assert_eq!(map.len(), n, "a pattern was reported twice");
    map
}

fn gapped_map(db: &SequenceDb, options: &GappedOptions) -> BTreeMap<Vec<u32>, u32> {
    let patterns = gapped::mine(db, options).unwrap();
    let n = patterns.len();
    let map: BTreeMap<_, _> = patterns.into_iter().map(|p| (p.items, p.support)).collect();
    assert_eq!(map.len(), n, "a pattern was reported twice");
    map
}

#[test]
fn contiguous_matches_reference_on_random_inputs() {
    let mut rng = Rng(0x5EED_C0DE);
    let mut nonempty = 0;
    for case in 0..3000 {
        let text = random_spmf(&mut rng, 9);
        let db = SequenceDb::parse_spmf(&text).unwrap();
        for min_support in 1..=3 {
            for closed_only in [false, true] {
                let min_length = 1 + rng.below(2) as usize;
                let max_length = match rng.below(3) {
                    0 => Some(1 + rng.below(4) as usize),
                    _ => None,
                };
                let options = ContiguousOptions {
                    min_support,
                    min_length,
                    max_length,
                    closed_only,
                };
                let expected =
                    reference::contiguous(&db, min_support, min_length, max_length, closed_only);
                let got = contiguous_map(&db, &options);
                assert_eq!(
                    got,
                    expected,
                    "case {case}, {options:?}, input {:?}",
                    String::from_utf8_lossy(&text)
                );
                assert_eq!(
                    contiguous::count(&db, &options).unwrap(),
                    expected.len() as u64
                );
                nonempty += usize::from(!expected.is_empty());
            }
        }
    }
    assert!(
        nonempty > 5000,
        "the random inputs found too few patterns: {nonempty}"
    );
}

#[test]
fn gapped_matches_reference_on_random_inputs() {
    let mut rng = Rng(0xFEED_BEEF);
    let mut nonempty = 0;
    for case in 0..3000 {
        let text = random_spmf(&mut rng, 9);
        let db = SequenceDb::parse_spmf(&text).unwrap();
        for min_support in 1..=3 {
            for max_gap in [None, Some(0), Some(1), Some(2), Some(5)] {
                let max_length = match rng.below(4) {
                    0 => Some(1 + rng.below(4) as usize),
                    _ => None,
                };
                let min_length = 1 + rng.below(2) as usize;
                let options = GappedOptions {
                    min_support,
                    max_gap,
                    min_length,
                    max_length,
                };
                let expected =
                    reference::gapped(&db, min_support, max_gap, min_length, max_length).unwrap();
                let got = gapped_map(&db, &options);
                assert_eq!(
                    got,
                    expected,
                    "case {case}, {options:?}, input {:?}",
                    String::from_utf8_lossy(&text)
                );
                assert_eq!(gapped::count(&db, &options).unwrap(), expected.len() as u64);
                nonempty += usize::from(!expected.is_empty());
            }
        }
    }
    assert!(
        nonempty > 10000,
        "the random inputs found too few patterns: {nonempty}"
    );
}

/// Identical sequences are mined once with a weight: supports must still count every copy.
#[test]
fn gapped_matches_reference_with_repeated_sequences() {
    let mut rng = Rng(0x5EED_0DD5);
    let mut repeated_inputs = 0;
    for case in 0..1500 {
        let text = random_spmf(&mut rng, 7);
        // Each sequence line appears one to four times, copies placed anywhere.
        let lines: Vec<&str> = std::str::from_utf8(&text)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let mut copies: Vec<&str> = Vec::new();
        for line in &lines {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(copies.len() as u64 + 1) as usize;
                copies.insert(at, line);
            }
        }
        repeated_inputs += usize::from(copies.len() > lines.len());
        let repeated = copies.join("\n");
        let db = SequenceDb::parse_spmf(repeated.as_bytes()).unwrap();
        for min_support in [1, 2, 3, 5] {
            for max_gap in [None, Some(0), Some(1), Some(3)] {
                let options = GappedOptions {
                    min_support,
                    max_gap,
                    min_length: 1,
                    max_length: None,
                };
                let expected = reference::gapped(&db, min_support, max_gap, 1, None).unwrap();
                assert_eq!(
                    gapped_map(&db, &options),
                    expected,
                    "case {case}, {options:?}, input {repeated:?}"
                );
            }
        }
    }
    assert!(
        repeated_inputs > 1000,
        "too few inputs had copies: {repeated_inputs}"
    );
}

#[test]
fn gapped_with_max_gap_zero_is_contiguous() {
    let mut rng = Rng(7);
    for _ in 0..500 {
        let db = SequenceDb::parse_spmf(&random_spmf(&mut rng, 30)).unwrap();
        for min_support in 1..=2 {
            let contiguous: BTreeMap<_, _> =
                contiguous_map(&db, &ContiguousOptions::with_min_support(min_support))
                    .into_iter()
                    .map(|(p, (s, _))| (p, s))
                    .collect();
            let options = GappedOptions {
                max_gap: Some(0),
                ..GappedOptions::with_min_support(min_support)
            };
            assert_eq!(gapped_map(&db, &options), contiguous);
        }
    }
}

#[test]
fn occurrences_match_a_scan() {
    let mut rng = Rng(11);
    for _ in 0..500 {
        let db = SequenceDb::parse_spmf(&random_spmf(&mut rng, 12)).unwrap();
        let patterns: Vec<Vec<u32>> = contiguous::mine(&db, &ContiguousOptions::default())
            .unwrap()
            .into_iter()
            .map(|p| p.items)
            .chain([vec![], vec![99]])
            .collect();
        let found = contiguous::occurrences(&db, &patterns);
        for (pattern, found) in patterns.iter().zip(&found) {
            assert_eq!(found, &scan_occurrences(&db, pattern), "{pattern:?}");
        }
    }
}

/// Above the threading threshold the sequences are split between threads; the lists must come
/// out whole and in order all the same.
#[test]
fn occurrences_match_a_scan_on_threads() {
    let mut rng = Rng(23);
    let sequences: Vec<Vec<u32>> = (0..3_000)
        .map(|_| {
            (0..1 + rng.below(15))
                .map(|_| rng.below(5) as u32)
                .collect()
        })
        .collect();
    let db = SequenceDb::from_sequences(
        sequences
            .iter()
            .map(|s| s.iter().map(|i| i.to_string()).collect::<Vec<_>>()),
    )
    .unwrap();
    // Above the 20,000 steps from which the scan is split between threads.
    assert_eq!(db.num_steps(), 24_208);
    let options = ContiguousOptions {
        min_support: 50,
        max_length: Some(4),
        ..ContiguousOptions::default()
    };
    let patterns: Vec<Vec<u32>> = contiguous::mine(&db, &options)
        .unwrap()
        .into_iter()
        .map(|p| p.items)
        .collect();
    assert_eq!(patterns.len(), 155);
    let found = contiguous::occurrences(&db, &patterns);
    for (pattern, found) in patterns.iter().zip(&found) {
        assert_eq!(found, &scan_occurrences(&db, pattern), "{pattern:?}");
    }
}

/// Every position where `pattern` starts, by a plain scan (none for the empty pattern).
fn scan_occurrences(db: &SequenceDb, pattern: &[u32]) -> Vec<Occurrence> {
    let mut expected = Vec::new();
    for (s, seq) in db.sequences().enumerate() {
        for start in 0..seq.len() {
            if !pattern.is_empty() && seq[start..].starts_with(pattern) {
                expected.push(Occurrence {
                    sequence: s as u32,
                    start: start as u32,
                });
            }
        }
    }
    expected
}

/// A tool repeated 200,000 times: quadratic work would not finish; the pattern counts are known
/// in closed form.
#[test]
fn long_runs_stay_linear() {
    const RUN: usize = 200_000;
    let run = vec!["a"; RUN];
    let mut wrapped = vec!["b"];
    wrapped.extend(run.iter().copied());
    wrapped.push("c");
    let db = SequenceDb::from_sequences([run, wrapped]).unwrap();
    // a^k (1 <= k <= RUN), b a^k and a^k c (0 <= k <= RUN), and b a^RUN c.
    let all = contiguous::count(&db, &ContiguousOptions::default()).unwrap();
    assert_eq!(all, RUN as u64 + 2 * (RUN as u64 + 1) + 1);
    // Visit rather than collect: materializing a^1 .. a^RUN would itself be quadratic.
    let mut twice = 0u64;
    contiguous::visit(
        &db,
        &ContiguousOptions::with_min_support(2),
        |items, support, occ| {
            let k = items.len() as u64;
            assert_eq!((items[0], items[items.len() - 1]), (0, 0));
            assert_eq!(support, 2);
            assert_eq!(occ, 2 * (RUN as u64 - k + 1), "a^{k}");
            twice += 1;
        },
    )
    .unwrap();
    assert_eq!(twice, RUN as u64);
    let closed = contiguous::mine(
        &db,
        &ContiguousOptions {
            closed_only: true,
            ..ContiguousOptions::with_min_support(2)
        },
    )
    .unwrap();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].items.len(), RUN);
    assert_eq!(closed[0].occurrences, 2);
    // The gapped miner walks the same depth with an explicit stack.
    let gapped = gapped::count(&db, &GappedOptions::with_min_support(2)).unwrap();
    assert_eq!(gapped, RUN as u64);
}

#[test]
fn tool_names_are_interned_and_mined() {
    let traces = [
        vec!["find_user", "get_user", "get_order", "get_order"],
        vec!["find_user", "get_user", "get_order"],
        vec!["list_items", "find_user", "get_user"],
    ];
    let db = SequenceDb::from_sequences(traces).unwrap();
    assert_eq!(db.num_items(), 4);
    assert_eq!(db.num_steps(), 10);
    let closed = contiguous::mine(
        &db,
        &ContiguousOptions {
            min_length: 2,
            closed_only: true,
            ..ContiguousOptions::with_min_support(2)
        },
    )
    .unwrap();
    let named: Vec<(Vec<&str>, u32, u64)> = closed
        .iter()
        .map(|p| {
            (
                p.items.iter().map(|&i| db.name(i)).collect(),
                p.support,
                p.occurrences,
            )
        })
        .collect();
    assert_eq!(
        named,
        vec![
            (vec!["find_user", "get_user"], 3, 3),
            (vec!["find_user", "get_user", "get_order"], 2, 2),
        ]
    );
    let occurrences = contiguous::occurrences(&db, &[&closed[1].items]);
    assert_eq!(
        occurrences[0],
        vec![
            Occurrence {
                sequence: 0,
                start: 0
            },
            Occurrence {
                sequence: 1,
                start: 0
            }
        ]
    );
}

#[test]
fn spmf_file_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.txt");
    std::fs::write(&path, "1 -1 2 -1 -2\n\n3 -1 oops -1 -2\n").unwrap();
    let err = SequenceDb::read_spmf(&path).unwrap_err().to_string();
    assert!(err.contains("bad.txt:3:"), "{err}");
    assert!(err.contains("oops"), "{err}");
    let missing = SequenceDb::read_spmf(dir.path().join("missing.txt")).unwrap_err();
    assert!(missing.to_string().contains("missing.txt"), "{missing}");
}

#[test]
fn invalid_options_are_errors() {
    let db = SequenceDb::from_sequences([["a"]]).unwrap();
    assert!(contiguous::count(&db, &ContiguousOptions::with_min_support(0)).is_err());
    assert!(gapped::count(&db, &GappedOptions::with_min_support(0)).is_err());
}

// ---- known answers on the shared benchmark data sets --------------------------------------

fn load(name: &str) -> Option<SequenceDb> {
    let path = shared_datasets()?.join("spm").join(name);
    Some(SequenceDb::read_spmf(path).unwrap())
}

fn check_contiguous(db: &SequenceDb, label: &str, min_support: u32, expected: u64) {
    let got = contiguous::count(db, &ContiguousOptions::with_min_support(min_support)).unwrap();
    assert_eq!(got, expected, "contiguous {label}@{min_support}");
}

fn check_gapped(db: &SequenceDb, label: &str, min_support: u32, expected: u64) {
    let got = gapped::count(db, &GappedOptions::with_min_support(min_support)).unwrap();
    assert_eq!(got, expected, "gapped {label}@{min_support}");
}

#[test]
fn dataset_sizes_match_the_readme() {
    let Some(sign) = load("SIGN.txt") else { return };
    let leviathan = load("LEVIATHAN.txt").unwrap();
    let msnbc = load("MSNBC.txt").unwrap();
    for (db, sequences, steps, items) in [
        (&sign, 730, 37_958, 267),
        (&leviathan, 5_834, 197_251, 9_025),
        (&msnbc, 31_790, 423_776, 17),
    ] {
        assert_eq!(
            (db.len(), db.num_steps(), db.num_items()),
            (sequences, steps, items)
        );
    }
}

#[test]
fn contiguous_known_answers() {
    let Some(sign) = load("SIGN.txt") else { return };
    check_contiguous(&sign, "SIGN", 37, 184);
    check_contiguous(&sign, "SIGN", 15, 371);
    let leviathan = load("LEVIATHAN.txt").unwrap();
    check_contiguous(&leviathan, "LEVIATHAN", 30, 1_370);
    check_contiguous(&leviathan, "LEVIATHAN", 12, 4_011);
    let msnbc = load("MSNBC.txt").unwrap();
    check_contiguous(&msnbc, "MSNBC", 32, 5_431);
    check_contiguous(&msnbc, "MSNBC", 7, 26_082);
}

#[test]
fn gapped_known_answers() {
    let Some(sign) = load("SIGN.txt") else { return };
    check_gapped(&sign, "SIGN", 219, 1_928);
    check_gapped(&sign, "SIGN", 146, 9_718);
    let leviathan = load("LEVIATHAN.txt").unwrap();
    check_gapped(&leviathan, "LEVIATHAN", 292, 3_698);
    check_gapped(&leviathan, "LEVIATHAN", 176, 12_534);
    let msnbc = load("MSNBC.txt").unwrap();
    check_gapped(&msnbc, "MSNBC", 636, 9_682);
    check_gapped(&msnbc, "MSNBC", 318, 45_279);
}

#[test]
fn ten_million_step_corpora_contiguous() {
    let Some(msnbc) = load("MSNBC.txt") else {
        return;
    };
    let x24 = msnbc.repeated(24).unwrap();
    assert_eq!(x24.num_steps(), 10_170_624);
    check_contiguous(&x24, "X24", 763, 5_431);
    let d24 = msnbc.disjoint_copies(24, 1000).unwrap();
    assert_eq!(d24.num_items(), 24 * 17);
    check_contiguous(&d24, "D24", 32, 130_344);
}

#[test]
fn ten_million_step_corpora_gapped() {
    let Some(msnbc) = load("MSNBC.txt") else {
        return;
    };
    let x24 = msnbc.repeated(24).unwrap();
    check_gapped(&x24, "X24", 15_260, 9_682);
    let d24 = msnbc.disjoint_copies(24, 1000).unwrap();
    check_gapped(&d24, "D24", 636, 232_368);
}
