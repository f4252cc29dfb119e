//! BEIR parsing: errors at the right file and line, BOMs and CRLF, and the shape gate.

use scifact_eval::{
    Error, MAX_LINE_BYTES, Profile, assemble, parse_corpus, parse_corpus_from, parse_qrels, parse_queries,
};

use crate::util::{CORPUS, QRELS, QUERIES, mini_profile};

fn parse_error(result: scifact_eval::Result<impl std::fmt::Debug>) -> (String, usize, String) {
    match result {
        Err(Error::Parse { file, line, reason }) => (file, line, reason),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn bad_json_is_reported_at_its_line() {
    let corpus = "{\"_id\": \"a\", \"text\": \"x\"}\n\n{\"_id\": \"b\", \"text\": oops}\n";
    let (file, line, _) = parse_error(parse_corpus("mini/corpus.jsonl", corpus.as_bytes()));
    assert_eq!((file.as_str(), line), ("mini/corpus.jsonl", 3));
}

#[test]
fn duplicate_and_empty_ids_are_refused() {
    let corpus = "{\"_id\": \"a\", \"text\": \"x\"}\n{\"_id\": \"a\", \"text\": \"y\"}\n";
    let (_, line, reason) = parse_error(parse_corpus("c", corpus.as_bytes()));
    assert_eq!(line, 2);
    assert!(reason.contains("duplicate"), "{reason}");
    let (_, line, reason) = parse_error(parse_queries("q", "{\"_id\": \"\", \"text\": \"x\"}\n".as_bytes()));
    assert_eq!(line, 1);
    assert!(reason.contains("empty"), "{reason}");
}

#[test]
fn boms_crlf_and_numeric_ids_are_accepted() {
    let qrels = "\u{feff}query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\n";
    let rows = parse_qrels("t", qrels.as_bytes()).unwrap();
    assert_eq!((rows[0].query_id.as_str(), rows[0].doc_id.as_str(), rows[0].score), ("q1", "d1", 1));
    let corpus = "\u{feff}{\"_id\": 42, \"title\": \"t\", \"text\": \"x\"}\r\n";
    assert_eq!(parse_corpus("c", corpus.as_bytes()).unwrap()[0].id, "42");
}

#[test]
fn qrels_errors_name_the_line() {
    let cases = [
        ("q\tc\ts\n", 1, "header"),
        ("query-id\tcorpus-id\tscore\nq1\td1\n", 2, "fields"),
        ("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", 2, "integer"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t1\n", 3, "duplicate"),
    ];
    for (text, expected_line, reason_part) in cases {
        let (_, line, reason) = parse_error(parse_qrels("mini/qrels/test.tsv", text.as_bytes()));
        assert_eq!(line, expected_line, "{text:?}");
        assert!(reason.contains(reason_part), "{text:?}: {reason}");
    }
}

#[test]
fn ids_with_whitespace_or_control_characters_grades_beyond_2_53_and_non_objects_are_refused_by_line() {
    let corpus = |line: &str| format!("{{\"_id\": \"a\", \"text\": \"x\"}}\n{line}\n");
    for (line, says) in [
        ("{\"_id\": \"d 1\", \"text\": \"x\"}", "holds whitespace"),
        ("{\"_id\": \"d\\t1\", \"text\": \"x\"}", "holds whitespace"),
        ("{\"_id\": \"d\\n1\", \"text\": \"x\"}", "holds whitespace"),
        ("{\"_id\": \" d1\", \"text\": \"x\"}", "holds whitespace"),
        ("{\"_id\": \"d\\u00071\", \"text\": \"x\"}", "control character"),
        ("[\"d-arr\", \"A title\", \"some text\"]", "not a JSON object"),
    ] {
        let (file, number, reason) = parse_error(parse_corpus("c/corpus.jsonl", corpus(line).as_bytes()));
        assert_eq!((file.as_str(), number), ("c/corpus.jsonl", 2), "{line}");
        assert!(reason.contains(says), "{line}: {reason}");
    }
    let (_, number, reason) =
        parse_error(parse_queries("q", "{\"_id\": \"q 1\", \"text\": \"x\"}\n".as_bytes()));
    assert_eq!(number, 1);
    assert!(reason.contains("holds whitespace"), "{reason}");
    for (row, says) in [
        (" q1\td1\t1", "query-id \" q1\" holds whitespace"),
        ("q1\td1 \t1", "corpus-id \"d1 \" holds whitespace"),
        ("q1\td1\t9223372036854775807", "within ±2^53"),
        ("q1\td1\t-9007199254740993", "within ±2^53"),
    ] {
        let text = format!("query-id\tcorpus-id\tscore\n{row}\n");
        let (_, number, reason) = parse_error(parse_qrels("t", text.as_bytes()));
        assert_eq!(number, 2, "{row:?}");
        assert!(reason.contains(says), "{row:?}: {reason}");
    }
    // ±2^53 itself is a grade, and a score's own surrounding spaces are not an id's.
    let edge = "query-id\tcorpus-id\tscore\nq1\td1\t 9007199254740992\n";
    assert_eq!(parse_qrels("t", edge.as_bytes()).unwrap()[0].score, 1 << 53);
}

#[test]
fn a_split_that_judges_no_query_is_refused_before_any_run() {
    let corpus = parse_corpus("c", CORPUS.as_bytes()).unwrap();
    let queries = parse_queries("q", QUERIES.as_bytes()).unwrap();
    let header_only = parse_qrels("t", b"query-id\tcorpus-id\tscore\n").unwrap();
    match assemble(&Profile::unregistered("made-up", "dev"), corpus, queries, header_only) {
        Err(Error::Shape { reason, .. }) => {
            assert!(reason.contains("qrels/dev.tsv judges no query"), "{reason}")
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[test]
fn invalid_utf8_is_reported_at_its_line() {
    let (_, line, reason) = parse_error(parse_queries("q", b"{\"_id\": \"a\", \"text\": \"x\"}\n\xff\n"));
    assert_eq!(line, 2);
    assert!(reason.contains("UTF-8"));
}

fn assembled(profile: &Profile, qrels: &str) -> scifact_eval::Result<scifact_eval::BeirCorpus> {
    assemble(
        profile,
        parse_corpus("c", CORPUS.as_bytes())?,
        parse_queries("q", QUERIES.as_bytes())?,
        parse_qrels("t", qrels.as_bytes())?,
    )
}

#[test]
fn the_shape_gate_keeps_judged_queries_and_checks_counts() {
    let corpus = assembled(&mini_profile(), QRELS).unwrap();
    assert_eq!(corpus.documents.len(), 4);
    assert_eq!(corpus.test_queries.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(), vec!["q1", "q2"]);
    assert_eq!(corpus.qrels.len(), 3);
    for (profile, part) in [
        (Profile { documents: Some(5), ..mini_profile() }, "4 documents, expected exactly 5"),
        (Profile { test_queries: Some(3), ..mini_profile() }, "2 test queries, expected exactly 3"),
    ] {
        match assembled(&profile, QRELS) {
            Err(Error::Shape { reason, .. }) => assert!(reason.contains(part), "{reason}"),
            other => panic!("expected a shape error, got {other:?}"),
        }
    }
    assert_eq!(Profile::scifact().documents, Some(5_183));
    assert_eq!(Profile::scifact().test_queries, Some(300));
}

#[test]
fn unknown_qrels_ids_are_refused_by_name() {
    for (qrels, name) in
        [("query-id\tcorpus-id\tscore\nq9\td1\t1\n", "q9"), ("query-id\tcorpus-id\tscore\nq1\td9\t1\n", "d9")]
    {
        match assembled(&mini_profile(), qrels) {
            Err(Error::Shape { reason, .. }) => assert!(reason.contains(name), "{reason}"),
            other => panic!("expected a shape error, got {other:?}"),
        }
    }
}

#[test]
fn a_streamed_corpus_parses_as_the_whole_one_does() {
    let corpus =
        "\u{feff}{\"_id\": 7, \"text\": \"x\"}\r\n\n  \n{\"_id\": \"b\", \"title\": \"t\"}\n{\"_id\": \"c\"}";
    let whole = parse_corpus("c", corpus.as_bytes()).unwrap();
    // A three-byte buffer splits every line, the BOM and the CRLF across refills.
    let mut reader = std::io::BufReader::with_capacity(3, corpus.as_bytes());
    let streamed = parse_corpus_from("c", &mut reader).unwrap();
    assert_eq!(streamed, whole);
    assert_eq!(whole.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["7", "b", "c"]);
    let bad = "{\"_id\": \"a\"}\r\n\n{\"_id\": \"a\"}\n";
    let (_, line, reason) =
        parse_error(parse_corpus_from("c", &mut std::io::BufReader::with_capacity(2, bad.as_bytes())));
    assert_eq!(line, 3);
    assert!(reason.contains("duplicate"), "{reason}");
}

#[test]
fn a_line_over_the_cap_is_refused_at_its_number_unparsed() {
    let mut corpus = b"{\"_id\": \"a\", \"text\": \"x\"}\n".to_vec();
    corpus.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 1));
    let (_, line, reason) = parse_error(parse_corpus("mini/corpus.jsonl", &corpus));
    assert_eq!(line, 2);
    assert!(reason.contains("cap on a line"), "{reason}");
    // A line exactly at the cap is read (and then fails as JSON, not as a cap).
    corpus.truncate(corpus.len() - 1);
    let (_, line, reason) = parse_error(parse_corpus("mini/corpus.jsonl", &corpus));
    assert_eq!(line, 2);
    assert!(!reason.contains("cap"), "{reason}");
}
