import java.io.BufferedWriter;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Anserini's impact search (SimpleImpactSearcher, the class Pyserini's LuceneImpactSearcher wraps) timed one query
 * at a time over an index IndexCollection built with -impact -pretokenized. Queries: one per line, "token:weight"
 * pairs separated by spaces. Writes {"p50_ms", "p95_ms", "queries", "top": [[docid, score] ...] of the first query}.
 * Usage: ImpactBench INDEX QUERIES ROUNDS OUT.json
 *
 * <p>Anserini's classes are reached by reflection: its jar targets Java 21, and the javac CI has (17) cannot read
 * those class files; the call itself is the same, its cost a Method.invoke.
 */
public final class ImpactBench {
  public static void main(String[] args) throws Exception {
    List<Map<String, Integer>> queries = new ArrayList<>();
    for (String line : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
      Map<String, Integer> query = new HashMap<>();
      for (String pair : line.trim().split(" ")) {
        if (pair.isEmpty()) continue;
        int colon = pair.indexOf(':');
        query.put(pair.substring(0, colon), Integer.parseInt(pair.substring(colon + 1)));
      }
      queries.add(query);
    }
    int rounds = Integer.parseInt(args[2]);
    Class<?> type = Class.forName("io.anserini.search.SimpleImpactSearcher");
    AutoCloseable searcher = (AutoCloseable) type.getConstructor(String.class).newInstance(args[0]);
    Method search = type.getMethod("search", Map.class, int.class);
    try (searcher) {
      // Warm the JIT and the page cache on one pass, as the project's bench runs after its index is built.
      for (Map<String, Integer> query : queries) search.invoke(searcher, query, 10);
      double[] times = new double[queries.size() * rounds];
      int at = 0;
      for (int round = 0; round < rounds; round++) {
        for (Map<String, Integer> query : queries) {
          long started = System.nanoTime();
          search.invoke(searcher, query, 10);
          times[at++] = (System.nanoTime() - started) / 1e6;
        }
      }
      Arrays.sort(times);
      Object[] top = (Object[]) search.invoke(searcher, queries.get(0), 10);
      StringBuilder hits = new StringBuilder();
      for (Object hit : top) {
        if (hits.length() > 0) hits.append(',');
        Object docid = hit.getClass().getField("docid").get(hit);
        Object score = hit.getClass().getField("score").get(hit);
        hits.append("[\"").append(docid).append("\",").append(score).append(']');
      }
      try (BufferedWriter out = Files.newBufferedWriter(Paths.get(args[3]), StandardCharsets.UTF_8)) {
        out.write(String.format(java.util.Locale.ROOT, "{\"p50_ms\": %.6f, \"p95_ms\": %.6f, \"queries\": %d, \"top\": [%s]}%n",
            percentile(times, 0.50), percentile(times, 0.95), times.length, hits));
      }
    }
  }

  private static double percentile(double[] sorted, double p) {
    int rank = (int) Math.ceil(p * sorted.length);
    return sorted[Math.max(1, Math.min(rank, sorted.length)) - 1];
  }
}
