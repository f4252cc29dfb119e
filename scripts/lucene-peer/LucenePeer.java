// Anserini's BM25 flat, driven directly: the peer the project's Lucene port is held to. Compiled against the
// fatjar pyserini bundles (Lucene 9.9.1, Anserini 1.7.1) by scripts/lucene-peer.sh; Anserini's own classes are
// reached by reflection, so this file compiles with any javac >= 11 while they need Java 21 at run time.
//
//   tables OUT.rs                      the tokenizer's DFA, Java's lowercase map and the stop words, as Rust
//   analyze IN OUT                     IN: id TAB base64(UTF-8 text) per line; OUT: id TAB tokens (space separated)
//   search INDEX TOPICS OUT HITS       TOPICS: id TAB base64(query) per line; OUT: qid TAB docid TAB rank TAB
//                                      score as float bits (hex), as SearchCollection -bm25 -removeQuery ranks
//   bench INDEX QUERIES ROUNDS OUT     per-query time of the same search (query built, top 1000, ids read), one
//                                      thread, after a warm-up round; OUT: JSON p50/p95/mean/max in ms; and of
//                                      Lucene's fastest path for the same query (top 1000 by score alone, block-max
//                                      WAND, no ids read: not Anserini's ranking, whose ties need the ids)
import java.io.*;
import java.lang.reflect.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.search.*;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.FSDirectory;

public final class LucenePeer {
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "tables": tables(Paths.get(args[1])); break;
      case "analyze": analyze(Paths.get(args[1]), Paths.get(args[2])); break;
      case "bench": bench(Paths.get(args[1]), Paths.get(args[2]), Integer.parseInt(args[3]), Paths.get(args[4])); break;
      case "search": search(Paths.get(args[1]), Paths.get(args[2]), Paths.get(args[3]), Integer.parseInt(args[4])); break;
      default: throw new IllegalArgumentException("unknown command " + args[0]);
    }
  }

  static Analyzer analyzer() throws Exception {
    Class<?> c = Class.forName("io.anserini.analysis.DefaultEnglishAnalyzer");
    return (Analyzer) c.getMethod("newDefaultInstance").invoke(null);
  }

  static List<String[]> readPairs(Path in) throws IOException {
    List<String[]> out = new ArrayList<>();
    for (String line : Files.readAllLines(in, StandardCharsets.UTF_8)) {
      int tab = line.indexOf('\t');
      String text = new String(Base64.getDecoder().decode(line.substring(tab + 1)), StandardCharsets.UTF_8);
      out.add(new String[] {line.substring(0, tab), text});
    }
    return out;
  }

  static void analyze(Path in, Path out) throws Exception {
    Analyzer analyzer = analyzer();
    try (Writer w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
      for (String[] pair : readPairs(in)) {
        StringBuilder line = new StringBuilder(pair[0]).append('\t');
        try (TokenStream ts = analyzer.tokenStream("contents", pair[1])) {
          CharTermAttribute term = ts.addAttribute(CharTermAttribute.class);
          ts.reset();
          boolean first = true;
          while (ts.incrementToken()) {
            if (!first) line.append(' ');
            line.append(term.buffer(), 0, term.length());
            first = false;
          }
          ts.end();
        }
        w.write(line.append('\n').toString());
      }
    }
  }

  static void search(Path index, Path topics, Path out, int hits) throws Exception {
    Analyzer analyzer = analyzer();
    Class<?> gen = Class.forName("io.anserini.search.query.BagOfWordsQueryGenerator");
    Object generator = gen.getConstructor().newInstance();
    Method build = gen.getMethod("buildQuery", String.class, Analyzer.class, String.class);
    try (DirectoryReader reader = DirectoryReader.open(FSDirectory.open(index));
        Writer w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
      IndexSearcher searcher = new IndexSearcher(reader);
      searcher.setSimilarity(new BM25Similarity(0.9f, 0.4f));
      Sort sort = new Sort(SortField.FIELD_SCORE, new SortField("id", SortField.Type.STRING_VAL));
      for (String[] topic : readPairs(topics)) {
        Query query = (Query) build.invoke(generator, "contents", analyzer, topic[1]);
        TopDocs top = searcher.search(query, hits, sort, true);
        int rank = 0;
        for (ScoreDoc sd : top.scoreDocs) {
          String docid = searcher.storedFields().document(sd.doc).get("id");
          if (docid.equals(topic[0])) continue;
          rank++;
          w.write(topic[0] + "\t" + docid + "\t" + rank + "\t"
              + String.format("%08x", Float.floatToRawIntBits(sd.score)) + "\n");
        }
      }
    }
  }

  static void bench(Path index, Path topics, int rounds, Path out) throws Exception {
    Analyzer analyzer = analyzer();
    Class<?> gen = Class.forName("io.anserini.search.query.BagOfWordsQueryGenerator");
    Object generator = gen.getConstructor().newInstance();
    Method build = gen.getMethod("buildQuery", String.class, Analyzer.class, String.class);
    List<String[]> queries = readPairs(topics);
    List<Double> millis = new ArrayList<>();
    List<Double> scoreOnly = new ArrayList<>();
    long rows = 0;
    try (DirectoryReader reader = DirectoryReader.open(FSDirectory.open(index))) {
      IndexSearcher searcher = new IndexSearcher(reader);
      searcher.setSimilarity(new BM25Similarity(0.9f, 0.4f));
      Sort sort = new Sort(SortField.FIELD_SCORE, new SortField("id", SortField.Type.STRING_VAL));
      for (int round = 0; round <= rounds; round++) {
        for (String[] topic : queries) {
          long started = System.nanoTime();
          Query query = (Query) build.invoke(generator, "contents", analyzer, topic[1]);
          TopDocs top = searcher.search(query, 1000, sort, true);
          int kept = 0;
          for (ScoreDoc sd : top.scoreDocs) {
            if (!searcher.storedFields().document(sd.doc).get("id").equals(topic[0])) kept++;
          }
          long took = System.nanoTime() - started;
          started = System.nanoTime();
          Query fast = (Query) build.invoke(generator, "contents", analyzer, topic[1]);
          searcher.search(fast, 1000);
          long fastTook = System.nanoTime() - started;
          if (round > 0) {   // round 0 warms the JIT
            millis.add(took / 1e6);
            scoreOnly.add(fastTook / 1e6);
          }
          if (round == 1) rows += kept;
        }
      }
    }
    String json = String.format(Locale.ROOT,
        "{\"queries\": %d, \"rounds\": %d, \"ranked_rows\": %d, \"query_ms\": %s, \"query_ms_score_only\": %s}\n",
        queries.size(), rounds, rows, summary(millis), summary(scoreOnly));
    Files.write(out, json.getBytes(StandardCharsets.UTF_8));
  }

  static String summary(List<Double> millis) {
    Collections.sort(millis);
    double sum = 0;
    for (double m : millis) sum += m;
    java.util.function.DoubleFunction<Double> at =
        p -> millis.get(Math.max(1, Math.min(millis.size(), (int) Math.ceil(millis.size() * p))) - 1);
    return String.format(Locale.ROOT, "{\"p50\": %.6f, \"p95\": %.6f, \"mean\": %.6f, \"max\": %.6f}",
        at.apply(0.5), at.apply(0.95), sum / millis.size(), at.apply(1.0));
  }

  static int[] field(Class<?> c, String name) throws Exception {
    Field f = c.getDeclaredField(name);
    f.setAccessible(true);
    return (int[]) f.get(null);
  }

  /** Run-length pairs (count, value), so the tables stay small in source. */
  static void packed(StringBuilder out, String name, int[] values) {
    List<Integer> pairs = new ArrayList<>();
    for (int i = 0; i < values.length; ) {
      int j = i;
      while (j < values.length && values[j] == values[i]) j++;
      pairs.add(j - i);
      pairs.add(values[i]);
      i = j;
    }
    out.append("/// `").append(name).append("`, ").append(values.length)
        .append(" entries as (run length, value) pairs.\n");
    out.append("pub(super) static ").append(name).append(": [i32; ").append(pairs.size()).append("] = [");
    for (int i = 0; i < pairs.size(); i++) {
      out.append(i % 16 == 0 ? "\n    " : " ").append(pairs.get(i)).append(',');
    }
    out.append("\n];\n/// Length of `").append(name).append("` unpacked.\npub(super) const ").append(name)
        .append("_LEN: usize = ").append(values.length).append(";\n\n");
  }

  static void tables(Path out) throws Exception {
    Class<?> impl = Class.forName("org.apache.lucene.analysis.standard.StandardTokenizerImpl");
    StringBuilder s = new StringBuilder();
    s.append("// Generated by scripts/lucene-peer.sh (LucenePeer tables) from Lucene ")
        .append(org.apache.lucene.util.Version.LATEST).append("'s StandardTokenizerImpl and Java ")
        .append(System.getProperty("java.version")).append("'s Character.toLowerCase. Do not edit.\n\n");
    for (String name : new String[] {"ZZ_CMAP_TOP", "ZZ_CMAP_BLOCKS", "ZZ_ACTION", "ZZ_ROWMAP", "ZZ_TRANS", "ZZ_ATTRIBUTE"}) {
      packed(s, name.substring(3), field(impl, name));
    }
    List<int[]> lower = new ArrayList<>();
    for (int cp = 0; cp <= Character.MAX_CODE_POINT; cp++) {
      int l = Character.toLowerCase(cp);
      if (l != cp) lower.add(new int[] {cp, l});
    }
    s.append("/// Every code point `Character.toLowerCase(int)` changes, with its image, in code point order.\n");
    s.append("pub(super) static LOWERCASE: [(u32, u32); ").append(lower.size()).append("] = [");
    for (int i = 0; i < lower.size(); i++) {
      s.append(i % 6 == 0 ? "\n    " : " ")
          .append(String.format("(0x%04X, 0x%04X),", lower.get(i)[0], lower.get(i)[1]));
    }
    s.append("\n];\n\n");
    List<String> stop = new ArrayList<>();
    for (Object o : EnglishAnalyzer.ENGLISH_STOP_WORDS_SET) stop.add(new String((char[]) o));
    Collections.sort(stop);
    s.append("/// `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`, sorted.\npub(super) static STOP_WORDS: [&str; ")
        .append(stop.size()).append("] = [");
    for (int i = 0; i < stop.size(); i++) {
      s.append(i % 10 == 0 ? "\n    " : " ").append('"').append(stop.get(i)).append("\",");
    }
    s.append("\n];\n");
    Files.write(out, s.toString().getBytes(StandardCharsets.UTF_8));
  }
}
