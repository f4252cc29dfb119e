//! TREC scores: the library's order survives a reader that keeps scores as C floats and breaks ties by
//! document id, and each score moves as little as that needs.

use scifact_eval::exports::{qrels_text, run_tag, trec_scores};

/// How trec_eval orders a query's lines: by the score as an `f32`, descending, then by document id,
/// descending.
fn trec_eval_order(scores: &[f64], docs: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        (scores[b] as f32).total_cmp(&(scores[a] as f32)).then_with(|| docs[b].cmp(docs[a]))
    });
    order
}

#[test]
fn tied_and_near_tied_scores_keep_the_library_order_in_single_precision() {
    // Exact ties (RRF), a pair equal only in f32, and distinct scores; document ids ascending, so trec_eval
    // would reverse every tie.
    let scores = [0.5, 0.25, 0.25, 0.25, 0.1 + 1e-12, 0.1, 0.05];
    let docs = ["a", "b", "c", "d", "e", "f", "g"];
    assert_ne!(trec_eval_order(&scores, &docs), (0..7).collect::<Vec<_>>(), "the raw scores would re-order");
    let written = trec_scores(&scores);
    assert_eq!(trec_eval_order(&written, &docs), (0..7).collect::<Vec<_>>());
    for pair in written.windows(2) {
        assert!((pair[1] as f32) < (pair[0] as f32), "{written:?}");
    }
    // Untouched where nothing needed moving; otherwise within a few f32 steps of the row's score.
    assert_eq!(written[0].to_bits(), scores[0].to_bits());
    assert_eq!(written[1].to_bits(), scores[1].to_bits());
    assert_eq!(written[6].to_bits(), scores[6].to_bits());
    for (w, s) in written.iter().zip(scores) {
        assert!((w - s).abs() <= 4.0 * f64::from(f32::EPSILON) * s.abs(), "{w} vs {s}");
    }
}

#[test]
fn random_rankings_always_come_out_strictly_descending_in_f32() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    for _ in 0..500 {
        let len = 1 + (next() % 20) as usize;
        // Descending scores from a handful of values, so ties and f32 collisions are common.
        let mut scores: Vec<f64> =
            (0..len).map(|_| (next() % 5) as f64 / 7.0 + (next() % 3) as f64 * 1e-10).collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        let written = trec_scores(&scores);
        for pair in written.windows(2) {
            assert!((pair[1] as f32) < (pair[0] as f32), "{scores:?} -> {written:?}");
        }
    }
}

#[test]
fn tags_and_qrels_have_the_trec_shape() {
    assert_eq!(run_tag("hybrid", "sha256:0123456789abcdef"), "scifact-audit-hybrid-0123456789ab");
    let mut qrels = std::collections::BTreeMap::new();
    qrels.insert("2".to_owned(), [("d9".to_owned(), 1), ("d1".to_owned(), 2)].into_iter().collect());
    qrels.insert("10".to_owned(), [("d5".to_owned(), 1)].into_iter().collect());
    assert_eq!(qrels_text(&qrels), "10 0 d5 1\n2 0 d1 2\n2 0 d9 1\n");
}
